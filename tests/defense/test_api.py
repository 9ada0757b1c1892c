"""The defense API's contract: what a defense can and cannot see, a stack's order, and bad
input (a hook that raises or answers malformed is an error row; a defense that cannot be
used is refused with one line naming it)."""

from __future__ import annotations

import gc
import json
import tomllib
import types
from pathlib import Path

import pytest

from containmentbench.defense import (
    ALLOW,
    BLOCK,
    CONFIRM,
    Decision,
    Defense,
    DefenseConfig,
    DefenseError,
    OutputVerdict,
    UndeclaredAssumption,
)
from containmentbench.defense.loading import Loaded, load_defense
from containmentbench.defense.registry import BUILTIN, Registered, lookup
from containmentbench.models.base import BackendConfig
from containmentbench.models.scripted import ScriptedBackend
from containmentbench.models.sim import SimBackend
from containmentbench.runtime.driver import ShardContext, run_episodes
from containmentbench.runtime.episode import RuntimeConfig
from containmentbench.scenarios.model import Scenario
from tests.conftest import ROOT, run_cli
from tests.defense.helpers import ctx

# ---------------------------------------------------------------------- helpers


def _cfg(name: str, **params) -> DefenseConfig:
    return DefenseConfig(name, "0", "test", None, params, key=name)


def _loaded(*layers: Defense) -> Loaded:
    return Loaded("+".join(d.label for d in layers), tuple(layers), "0" * 64)


def _run(scenarios, defense, plan="attacker", profile=None):
    if profile:
        backend = SimBackend(BackendConfig("sim", "sim", options={"profile": profile}))
    else:
        backend = ScriptedBackend(BackendConfig("scripted", "scripted", options={"plan": plan}))
    c = ShardContext("test", "m", backend.name, defense.label, 1, None)
    eps, _, _ = run_episodes(scenarios, defense, backend, c, RuntimeConfig())
    return eps


def _kinds(ep, *kinds):
    return [e for e in ep.rec.events if e["kind"] in kinds]


# ---------------------------------------------------------------------- what a defense sees


def _reachable(root, limit=200_000):
    """Every object reachable from ``root`` through attributes, slots, containers, bound
    methods and closures (modules, classes and functions' globals excluded: the package
    namespace, not the rollout's state)."""
    seen, todo, out = set(), [root], []
    while todo and len(seen) < limit:
        o = todo.pop()
        if id(o) in seen or isinstance(o, (types.ModuleType, type)):
            continue
        seen.add(id(o))
        out.append(o)
        if isinstance(o, (str, bytes, int, float, bool)) or o is None:
            continue
        if isinstance(o, (dict, types.MappingProxyType)):
            todo += list(o.keys()) + list(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            todo += list(o)
        elif isinstance(o, types.MethodType):
            todo.append(o.__self__)
        elif isinstance(o, types.FunctionType):
            todo += [c.cell_contents for c in (o.__closure__ or ()) if c.cell_contents]
        else:
            todo += list(getattr(o, "__dict__", {}).values())
            for cls in type(o).__mro__:
                for s in getattr(cls, "__slots__", ()):
                    if hasattr(o, s):
                        todo.append(getattr(o, s))
    return out


def test_a_defense_reaches_no_ground_truth_from_its_context(full_main):
    s = next(x for x in full_main if x.stage == "security" and x.meta.get("injection"))
    d = load_defense("intent_ledger_v2").layers[0]
    c = ctx(d, s)
    objs = _reachable(c)
    assert not any(isinstance(o, Scenario) for o in objs)
    strings = [o for o in objs if isinstance(o, str)]
    injection = s.meta["injection"]
    assert not any(injection[:40] in x for x in strings)  # the attack text, before any read
    secret = json.dumps(s.attacker_goal, sort_keys=True)
    assert not any(secret in x for x in strings)
    for u in s.untrusted:  # no unread untrusted content
        assert not any(u["text"][:40] in x for x in strings if len(u["text"]) >= 40)
    # what a deployment knows is there: the trusted task and the tool annotations
    assert c.task == s.goals[0] and c.tools["send_email"].high_risk
    with pytest.raises(AttributeError):
        c.scenario  # noqa: B018
    with pytest.raises(AttributeError):
        c.oracle  # noqa: B018


def test_knowledge_only_for_a_defense_that_declares_it(smoke):
    class Curious(Defense):
        def authorize(self, call, ctx):
            return Decision.allow("x", {"m": ctx.ledger.match(call.tool, call.args)})

    d = Curious(_cfg("curious"))
    with pytest.raises(UndeclaredAssumption, match=r"defense 'curious' reads ctx\.ledger"):
        ctx(d, smoke[0]).ledger  # noqa: B018
    # at run time the same read is an error row naming the defense, never a decision
    ep = _run([s for s in smoke if s.stage == "security"][:1], _loaded(d))[0]
    assert ep.status == "error" and "add 'intent_ledger' to its assumes" in ep.error
    Curious.assumes = frozenset({"intent_ledger"})
    ep = _run([s for s in smoke if s.stage == "security"][:1], _loaded(Curious(
        _cfg("curious"))))[0]
    assert ep.status == "ok"


def test_the_trace_view_is_read_only_and_hides_unread_sources(smoke):
    seen = []

    class Peek(Defense):
        def authorize(self, call, ctx):
            evs = ctx.trace.events()
            seen.append([e["kind"] for e in evs])
            with pytest.raises(TypeError):
                evs[0]["kind"] = "forged"  # type: ignore[index]
            return None

    s = next(x for x in smoke if x.stage == "security")
    ep = _run([s], _loaded(Peek(_cfg("peek"))))[0]
    assert seen and all("source" not in kinds for kinds in seen)
    assert ep.rec.events[0]["kind"] == "source"  # the runtime's own trace keeps them
    # a layer without authorize leaves the decision to the default (low risk: allowed)
    assert {e["rule_id"] for e in _kinds(ep, "decision")} <= {
        "allow_no_authorize_hook", "allow_low_risk"}


# ---------------------------------------------------------------------- stacks


class _Fixed(Defense):
    def authorize(self, call, ctx):
        if not call.high_risk:
            return None
        v = self.params["verdict"]
        if v == "rewrite":
            return Decision.rewrite({**call.args, **self.params["args"]}, "rewrite_args")
        return Decision(v, f"{v}_{self.config.key}")


def _fixed(key, verdict, **args):
    return _Fixed(DefenseConfig(key, "0", "t", None, {"verdict": verdict, "args": args},
                                key=key))


def test_a_stack_decides_by_the_strongest_verdict_of_its_layers_in_order(smoke):
    s = next(x for x in smoke if x.stage == "active_tainted")
    stack = _loaded(_fixed("a", ALLOW), _fixed("b", CONFIRM), _fixed("c", BLOCK))
    ep = _run([s], stack, plan="benign")[0]
    dec = [e for e in _kinds(ep, "decision") if e["high_risk"]]
    assert dec and all((e["decision"], e["layer"], e["rule_id"]) == (BLOCK, "c", "block_c")
                       for e in dec)
    ev = json.loads(dec[0]["evidence"])
    assert [x["layer"] for x in ev["layers"]] == ["a", "b", "c"]
    assert not _kinds(ep, "confirm_request")  # a block needs no confirmation
    # confirm beats allow; the confirming layer's own confirm hook answers (none: denied)
    ep = _run([s], _loaded(_fixed("a", ALLOW), _fixed("b", CONFIRM)), plan="benign")[0]
    conf = _kinds(ep, "confirmation")
    assert conf and {(e["decision"], e["layer"]) for e in conf} == {("denied", "b")}


def test_a_rewrite_changes_what_executes_and_what_later_layers_see(smoke):
    s = next(x for x in smoke if x.stage == "active_tainted"
             and any(st.tool == "send_email" for st in x.benign_plan))
    seen = []

    class Look(Defense):
        def authorize(self, call, ctx):
            if call.high_risk:
                seen.append(dict(call.args))
            return None

    ep = _run([s], _loaded(_fixed("r", "rewrite", subject="[checked]"), Look(_cfg("look"))),
              plan="benign")[0]
    commit = next(e for e in _kinds(ep, "commit") if e["tool"] == "send_email")
    assert json.loads(commit["args"])["subject"] == "[checked]"
    assert seen and seen[0]["subject"] == "[checked]"
    prop = next(e for e in _kinds(ep, "proposal") if e["tool"] == "send_email")
    assert json.loads(prop["args"])["subject"] != "[checked]"  # the model's proposal is kept
    assert next(e for e in _kinds(ep, "decision") if e["high_risk"])["layer"] == "r"


# ---------------------------------------------------------------------- other hooks


class _Withhold(Defense):
    """Withholds every tainted output: the agent never reads untrusted content."""

    def inspect_output(self, out, ctx):
        return OutputVerdict.withhold("withhold_tainted") if out.tainted else None


def test_a_withheld_output_never_reaches_the_agent_and_carries_no_taint(smoke):
    attacked = [s for s in smoke if s.stage == "security"]
    eps = _run(attacked, _loaded(_Withhold(_cfg("w"))), profile="always_follow")
    for s, ep in zip(attacked, eps, strict=True):
        assert ep.status in ("ok", "step_limit"), ep.error
        checks = _kinds(ep, "output_check")
        assert checks and {e["decision"] for e in checks} == {"withhold"}
        calls = [i for i, e in enumerate(ep.rec.events) if e["kind"] == "model_call"]
        # the model's context is never tainted: nothing untrusted reached it
        assert not any(ep.rec.tainted(i) for i in calls), s.id
    # the simulated agent follows every injection it sees; here it saw none
    none = _run(attacked, load_defense("none"), profile="always_follow")
    from tests.defense.helpers import harmed
    assert sum(harmed(s, e) for s, e in zip(attacked, none, strict=True)) > 0
    assert sum(harmed(s, e) for s, e in zip(attacked, eps, strict=True)) == 0


def test_plan_task_filters_tools_and_adds_guidance(smoke):
    class OnlyReads(Defense):
        def plan_task(self, task, ctx):
            from containmentbench.defense import TaskPlan
            keep = frozenset(t for t in task.tools if not ctx.tools[t].high_risk)
            return TaskPlan("reads_only", guidance="Only read.", tools=keep)

    s = next(x for x in smoke if x.stage == "clean" and x.topology == "single")
    ep = _run([s], _loaded(OnlyReads(_cfg("ro"))), plan="benign")[0]
    plan = _kinds(ep, "task_plan")
    assert plan and plan[0]["layer"] == "ro" and plan[0]["rule_id"] == "reads_only"
    assert "send_email" not in json.loads(plan[0]["args"])["tools"]
    # the agent was offered only reads: its side effect is an invalid tool, never proposed
    assert not _kinds(ep, "commit") or all(
        not e["high_risk"] for e in _kinds(ep, "commit"))
    assert ep.counts["invalid_tool"] >= 1


# ---------------------------------------------------------------------- bad input


@pytest.mark.parametrize("answer,why", [
    (lambda c: Decision("maybe", "r"), "verdict 'maybe' is not one of"),
    (lambda c: Decision.allow(""), "needs a non-empty rule_id"),
    (lambda c: "allow", "returned str, expected Decision"),
    (lambda c: Decision.allow("r", {"x": object()}), "evidence that is a JSON object"),
    (lambda c: 1 / 0, "raised ZeroDivisionError"),
])
def test_a_failing_hook_is_an_error_row_never_an_outcome(smoke, answer, why):
    class Bad(Defense):
        def authorize(self, call, ctx):
            return answer(call)

    s = next(x for x in smoke if x.stage == "security")
    ep = _run([s], _loaded(Bad(_cfg("bad"))))[0]
    assert ep.status == "error"
    assert ep.error.startswith(f"defense error: defense 'bad' hook 'authorize' on scenario "
                               f"'{s.id}'") and why in ep.error
    assert not _kinds(ep, "commit") and not _kinds(ep, "decision")  # not a block either
    assert _kinds(ep, "defense_error")


def _defenses_file(tmp_path: Path, code: str, cls: str = "Mine", key: str = "mine") -> Path:
    (tmp_path / "mine.py").write_text(code)
    f = tmp_path / "defenses.yaml"
    f.write_text(f"{key}:\n  impl: mine.py:{cls}\n  method_version: '1'\n  family: test\n")
    return f


@pytest.mark.parametrize("code,cls,message", [
    ("from containmentbench.defense import Defense\n"
     "class Mine(Defense):\n    def inspect_outputs(self, out, ctx):\n        return None\n",
     "Mine", "unknown hook 'inspect_outputs' (did you mean inspect_output?)"),
    ("from containmentbench.defense import Defense\nclass Mine(Defense:\n    pass\n",
     "Mine", "importing"),
    ("class Mine:\n    pass\n", "Mine", "is not a subclass of containmentbench.defense"),
    ("from containmentbench.defense import Defense\nclass Mine(Defense):\n"
     "    assumes = frozenset({'oracle'})\n", "Mine", "unknown assumption 'oracle'"),
    ("from containmentbench.defense import Defense\nclass Mine(Defense):\n    pass\n",
     "Other", "has no 'Other'"),
])
def test_a_defense_that_cannot_be_used_is_one_line_exit_2(tmp_path, capsys, code, cls,
                                                          message):
    f = _defenses_file(tmp_path, code, cls)
    rc = run_cli("config", "check", "study=smoke", f"defenses_file={f}")
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "defense 'mine'" in err and message in err


def test_one_name_configured_twice_or_registered_twice_is_refused(tmp_path, capsys,
                                                                  monkeypatch):
    f = _defenses_file(tmp_path, "from containmentbench.defense import Defense\n"
                                 "class Mine(Defense):\n    pass\n", key="intent_ledger_v2")
    assert run_cli("config", "check", "study=smoke", f"defenses_file={f}") == 2
    assert "defense 'intent_ledger_v2' is configured twice" in capsys.readouterr().err
    from containmentbench.defense import registry

    two = (Registered("dup", "a:A", "entry point", "pkg-a", "1"),
           Registered("dup", "b:B", "entry point", "pkg-b", "2"))
    monkeypatch.setattr(registry, "_entry_points", lambda: {"dup": two})
    with pytest.raises(DefenseError, match=r"registered twice: by pkg-a .* and pkg-b"):
        lookup("dup")


def test_the_project_registers_its_defenses_as_entry_points_like_a_user():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    eps = meta["project"]["entry-points"]["containmentbench.defenses"]
    assert eps == BUILTIN
    for name in BUILTIN:
        assert lookup(name).origin == "built-in"


def test_defenses_check_catches_what_a_defense_should_not_do(tmp_path, capsys):
    code = '''
import gc
from containmentbench.defense import Decision, Defense
COUNT = [0]

class Snoop(Defense):
    def authorize(self, call, ctx):
        found = [o for o in gc.get_objects() if type(o).__name__ == "Scenario"]
        return Decision.allow("allow", {"seen": len(found) > 0})

class Moody(Defense):
    def authorize(self, call, ctx):
        COUNT[0] += 1
        return Decision.allow(f"allow_{COUNT[0] % 2}")

class Writer(Defense):
    def authorize(self, call, ctx):
        with open(__file__ + ".log", "a") as fh:
            fh.write(call.tool)
        return None
'''
    (tmp_path / "mine.py").write_text(code)
    f = tmp_path / "defenses.yaml"
    f.write_text("".join(f"{k}:\n  impl: mine.py:{c}\n" for k, c in
                         (("snoop", "Snoop"), ("moody", "Moody"), ("writer", "Writer"))))
    expect = {"snoop": "FAIL no access to the benchmark's ground truth -- defense 'snoop' hook "
                       "'authorize'",
              "moody": "FAIL determinism",
              "writer": "FAIL no writes, network or processes outside the trace"}
    for key, line in expect.items():
        rc = run_cli("defenses", "check", key, f"defenses_file={f}")
        out = capsys.readouterr().out
        assert rc == 1 and line in out, (key, out)
    assert run_cli("defenses", "check", "intent_ledger_v2") == 0
    assert "ok: the defense passed every check" in capsys.readouterr().out
    gc.collect()


def test_a_defense_file_that_is_a_fifo_is_refused_without_hanging(tmp_path, capsys):
    import os

    os.mkfifo(tmp_path / "mine.py")
    f = tmp_path / "defenses.yaml"
    f.write_text("mine:\n  impl: mine.py:Mine\n")
    assert run_cli("config", "check", "study=smoke", f"defenses_file={f}") == 2
    err = capsys.readouterr().err
    assert "mine.py: the defense file is a FIFO, not a regular file" in err
