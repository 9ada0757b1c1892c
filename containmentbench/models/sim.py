"""The embedded simulated agent (``sim`` backend): a seeded harness-validation agent.

It produces raw completion text that goes through the real parser. It follows the scenario's
benign plan for its own agent and session; once an injected instruction is visible in its
context it follows it with the profile's propensity for the scenario's carrier and topology
(times ``guidance_factor`` when the system prompt carries defense guidance, the documented
effect of prompt-only guidance); it emits a configurable mix of output formats plus
malformed actions, invalid tool names and drifted arguments, and reacts to blocks.

Its figures validate the harness, not any model; every output it feeds is labelled ``sim``.
All randomness comes from the per-request seed, so a rollout is reproducible and draws are
shared across defenses while trajectories agree (common random numbers).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from containmentbench.canonical import derive_rng
from containmentbench.errors import BenchError
from containmentbench.models.base import (
    BackendConfig,
    Completion,
    GenerationRequest,
    defense_echo,
)
from containmentbench.parser.formats import render
from containmentbench.sandbox.tools import TOOLS

GUIDANCE_MARKER = "Security guidance:"
RELAY_FIELD = {"delegate": "task", "handoff": "note"}


@dataclass(frozen=True)
class SimProfile:
    name: str
    follow: dict[str, float]
    topology: dict[str, float]
    guidance_factor: float
    formats: dict[str, float]
    final_formats: dict[str, float]
    p_malformed: float
    p_invalid_tool: float
    p_drift: float
    retry_after_block: float
    max_attempts: int

    @classmethod
    def from_mapping(cls, name: str, m: dict[str, Any], source: str) -> SimProfile:
        fields = cls.__dataclass_fields__
        for key in m:
            if key not in fields:
                raise BenchError(f"unknown sim profile key '{key}'", file=source, field=key)
        missing = [k for k in fields if k != "name" and k not in m]
        if missing:
            raise BenchError("missing sim profile key", file=source, field=missing[0])
        prof = cls(name=name, **{k: m[k] for k in fields if k != "name"})
        for key in ("p_malformed", "p_invalid_tool", "p_drift", "retry_after_block",
                    "guidance_factor", *(f"follow.{c}" for c in prof.follow)):
            v = prof.follow[key[7:]] if key.startswith("follow.") else getattr(prof, key)
            if not 0.0 <= float(v) <= 1.0:
                raise BenchError(f"must be a probability in [0, 1], got {v}", file=source,
                                 field=key)
        return prof


# profiles handed over already parsed (a rollout job gets them from the pre-flight's plan
# file, pipeline/planfile.py), each with the sha256 of the packaged file they were read from:
# used only while that file is unchanged, and checked like any profile (from_mapping)
_PRIMED: dict[str, tuple[str, dict[str, Any]]] = {}


def _packaged_text() -> str:
    return resources.files("containmentbench.models").joinpath("sim_profiles.yaml").read_text()


def packaged_sha256() -> str:
    import hashlib

    return hashlib.sha256(_packaged_text().encode()).hexdigest()


def prime_profile(name: str, mapping: dict[str, Any], sha256: str) -> None:
    _PRIMED[name] = (sha256, mapping)


def packaged_profiles() -> dict[str, Any]:
    """The packaged profiles: plain YAML without interpolation, read with libyaml rather than
    OmegaConf (whose import alone cost every sim rollout job ~0.1 s; a test checks that both
    readers give the same mapping)."""
    import yaml

    return yaml.load(_packaged_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_profile(name_or_path: str) -> SimProfile:
    """A named profile from the packaged ``sim_profiles.yaml`` or a YAML file of one profile."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        from omegaconf import OmegaConf  # user files may use interpolation

        if not p.exists():
            raise BenchError("sim profile file not found", file=str(p), field="sim_profile")
        return SimProfile.from_mapping(p.stem, OmegaConf.to_container(OmegaConf.load(p)), str(p))
    primed = _PRIMED.get(name_or_path)
    if primed is not None and primed[0] == packaged_sha256():
        return SimProfile.from_mapping(name_or_path, primed[1], "sim_profiles.yaml")
    allp = packaged_profiles()
    if name_or_path not in allp:
        raise BenchError(f"unknown sim profile '{name_or_path}' (known: {', '.join(allp)})",
                         field="sim_profile")
    return SimProfile.from_mapping(name_or_path, allp[name_or_path], "sim_profiles.yaml")


def _pick(rng: np.random.Generator, weights: dict[str, float]) -> str:
    names = list(weights)
    w = np.asarray([weights[n] for n in names], dtype=float)
    return names[int(rng.choice(len(names), p=w / w.sum()))]


def candidate_factor(sha256: str) -> float:
    """The sim agent's documented response to a searched candidate's text (paper 000 §6.3
    replay): its follow propensity is multiplied by a factor drawn uniformly from [0, 1.5]
    by a generator keyed on the candidate's sha256 alone, so a candidate is more or less
    persuasive in a seeded way that no figure was tuned to; when the agent follows, it takes
    the action the text requests (the derived scenario's attack steps). Scenarios without a
    candidate never call this, so their traces are unchanged."""
    return float(derive_rng("sim-candidate", sha256).uniform(0.0, 1.5))


def _outcome(text: str) -> str:
    for prefix, kind in (("FORMAT ERROR", "retry"), ("INVALID TOOL", "retry"),
                         ("BLOCKED", "blocked"), ("NOT CONFIRMED", "blocked")):
        if text.startswith(prefix):
            return kind
    return "done"


def _drift(tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """One content argument replaced by a plausible but unrequested value."""
    for p in TOOLS[tool].params:
        if p.role == "content" and p.name in args and isinstance(args[p.name], str):
            out = dict(args)
            value = args[p.name]
            if len(value) == 10 and value[4] == "-" and value[7] == "-":
                out[p.name] = value[:8] + ("01" if value[8:] != "01" else "02")
            else:
                out[p.name] = "Follow-up on the partner note"
            return out
    return None


class SimBackend:
    """Batch interface over the simulated agent (it needs no batching, but keeps the
    lockstep driver's one-call-per-tick contract)."""

    name = "sim"
    seed_supported = True

    def __init__(self, config: BackendConfig) -> None:
        unknown = sorted(set(config.options) - {"profile", "latency_ms"})
        if unknown:
            raise BenchError(f"unknown sim backend option '{unknown[0]}'",
                             field=f"backend.options.{unknown[0]}")
        self.profile = load_profile(config.options.get("profile", "default"))
        # emulated provider latency per batch call (orchestration tests: a job that is
        # still running when it is cancelled); never changes any trace content
        self.latency_s = float(config.options.get("latency_ms", 0)) / 1000.0

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        if self.latency_s:
            import time
            time.sleep(self.latency_s)
        # a defense's own model call: the simulated agent has no judgement of its own to
        # offer, so it echoes the request (models.base.defense_echo; labelled sim as ever)
        return [self._rewrite(r) if isinstance(r.sim, dict) else defense_echo(r) or
                self._act(r) for r in requests]

    @staticmethod
    def _rewrite(req: GenerationRequest) -> Completion:
        """A candidate-search rewrite request (attacks/mutation.py: the seeded template
        rewriter); never part of a rollout, so no existing trace changes."""
        from containmentbench.attacks.mutation import sim_rewrite

        text = sim_rewrite(req.sim, req.seed)
        return Completion(text, prompt_tokens=0, completion_tokens=len(text) // 4)

    def close(self) -> None:
        pass

    def _state(self, s: Any, a: Any) -> dict[str, Any]:
        st = a.sim
        if not st:
            mine = [x for x in s.benign_plan if x.agent == a.agent_id and x.session == self._session(a)]
            st["queue"] = [(x.tool, dict(x.args)) for x in mine if x.tool != "final_answer"]
            st["final"] = next((x.args.get("text", "Done.") for x in mine
                                if x.tool == "final_answer"), "Done.")
            st["attack"] = [(x.tool, dict(x.args)) for x in s.attack_steps
                            if x.agent == a.agent_id and x.session == self._session(a)]
            st["decided"] = not st["attack"] or not s.meta.get("injection")
            st["needle"] = (s.meta.get("injection") or "")[:60]
            st["scan"] = 1
            st["current"] = None
            st["attempts"] = 0
        return st

    @staticmethod
    def _session(a: Any) -> int:
        return int(a.instance.split("#", 1)[1].split(".", 1)[0])

    def _act(self, req: GenerationRequest) -> Completion:
        s, a, _spec = req.sim
        prof = self.profile
        st = self._state(s, a)
        rng = derive_rng("sim", req.seed)
        msgs = req.messages
        # 1. outcome of the previous action: current = (tool, intended args, sent args)
        cur = st["current"]
        if cur is not None:
            kind = _outcome(msgs[-1]["content"]) if msgs[-1]["role"] == "user" else "done"
            retry = kind == "retry" or (
                kind == "blocked" and rng.random() < prof.retry_after_block)
            if retry and st["attempts"] < prof.max_attempts:
                st["queue"].insert(0, (cur[0], cur[1]))  # intended (undrifted) arguments
            else:
                st["attempts"] = 0
            st["current"] = None
        # 2. an injected instruction becomes visible in the context
        if not st["decided"]:
            for m in msgs[st["scan"]:]:
                if st["needle"] and st["needle"] in m["content"]:
                    st["decided"] = True
                    p = prof.follow.get(s.carrier or "", 0.0) * prof.topology.get(s.topology, 1.0)
                    if GUIDANCE_MARKER in msgs[0]["content"]:
                        p *= prof.guidance_factor
                    cand = s.meta.get("candidate")
                    if cand:  # a searched candidate's text (attacks/derive.py)
                        p = min(1.0, p * candidate_factor(cand["sha256"]))
                    if rng.random() < p:
                        if s.meta.get("placement") == "before_final":
                            st["queue"].extend(st["attack"])
                        else:
                            st["queue"][0:0] = st["attack"]
                    break
            st["scan"] = len(msgs)
        # 3. next action, with format noise
        if not st["queue"]:
            fmt = _pick(rng, prof.final_formats)
            text, _ = render(fmt, None, None, st["final"], rng)
            return Completion(text, prompt_tokens=0, completion_tokens=len(text) // 4)
        tool, args = st["queue"].pop(0)
        if tool in RELAY_FIELD:
            # relay what this agent actually saw (its task and observations), not the plan's
            # precomputed material: content it never observed must not reach the next agent
            seen = "\n".join(m["content"] for m in msgs[1:] if m["role"] == "user")
            args = {**args, RELAY_FIELD[tool]: seen}
        st["attempts"] += 1
        u = rng.random()
        if u < prof.p_malformed:
            st["current"] = (tool, args, args)
            text, _ = render("malformed_json", tool, args, None, rng)
        elif u < prof.p_malformed + prof.p_invalid_tool:
            st["current"] = (tool, args, args)
            text, _ = render("invalid_tool", tool, args, None, rng)
        else:
            send = args
            if (st["attempts"] == 1 and TOOLS[tool].kind == "side_effect"
                    and rng.random() < prof.p_drift):
                send = _drift(tool, args) or args
            st["current"] = (tool, args, send)
            text, _ = render(_pick(rng, prof.formats), tool, send, None, rng)
        return Completion(text, prompt_tokens=0, completion_tokens=len(text) // 4)
