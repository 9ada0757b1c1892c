"""What happened in one rollout, told first on its trace page (the summary box).

The events named here are found by the metrics' own definitions on the rollout's trace and
scenario, never guessed from the trace's shape:

* a violating rollout: the commits of C_tau that violate eq. 5 (paper 000 §4.4,
  ``metrics.definitions.violating_commits``, the same test ``committed_harm`` counts), with
  the tool, target and eq. 5 components of each, the decision (and confirmation) that let
  its call through, and where the injection entered: the untrusted ``source`` node whose
  taint label the commit carries and the first event that brought that label to an agent;
* a contained rollout (an attack placed, nothing violating committed): the act that
  contained it (``metrics.definitions.containment``, the event behind ``contained_by``: a
  block, denial or rewrite of a would-be violation, an output check that removed the
  injected text, or tools withheld), or that no layer acted (``no_layer``);
* a rollout without an attack, or one that ended in a provider error, says so.

The scenario comes from the suite the metrics read (``scenarios.manifest.load_suite``),
checked by its hash; when it is missing or differs, the box says the event could not be
determined instead of pointing at one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.escape import visible
from containmentbench.metrics import definitions as M
from containmentbench.metrics.compute import suite_scenarios
from containmentbench.report import html as H
from containmentbench.report.rundir import Rollout
from containmentbench.scenarios.model import Scenario

#: event kinds that carry a call's verdict (the call id links them to its proposal/commit)
VERDICTS = ("decision", "confirm_request", "confirmation")
GIST = 140


def scenario_of(row: dict[str, Any]) -> tuple[Scenario | None, str]:
    """The rollout's scenario from its suite, or None and why not."""
    try:
        s = suite_scenarios(str(row.get("suite")))
    except BenchError:  # no host path in the page: its bytes must not depend on the checkout
        return None, (f"its suite '{row.get('suite')}' is not a scenario suite this report "
                      "can read, so eq. 5 is not re-applied to its events here")
    scen = s.get(row["scenario_id"])
    if scen is None:
        return None, f"scenario {row['scenario_id']} is not in suite '{row.get('suite')}'"
    if scen.hash != row.get("scenario_hash"):
        return None, f"scenario {row['scenario_id']} differs from the one the rollout ran"
    return scen, ""


@dataclass
class Story:
    """The summary of one rollout: ``kind`` is violation, contained, no_attack, error or
    unknown; ``marks`` maps an event's seq to its mark (violation / contained)."""

    kind: str
    title: str
    items: list[tuple[str, str]] = field(default_factory=list)
    marks: dict[int, str] = field(default_factory=dict)


def _gist(text: Any, width: int = GIST) -> str:
    s = " ".join(visible(str(text or "")).split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _ev(seq: int, text: str) -> str:
    """An event reference linking to its timeline row."""
    return f'{H.link(f"#ev-{seq}", f"event #{seq}")} {text}'


def _call(ev: dict[str, Any]) -> str:
    target = f" → {H.text(visible(str(ev['target'])))}" if ev.get("target") else ""
    return f"<code>{H.text(visible(str(ev.get('tool'))))}</code>{target}"


def _verdicts(events: list[dict[str, Any]], call_id: Any, before: int) -> list[str]:
    out = []
    for e in events:
        if e["seq"] >= before or e["kind"] not in VERDICTS or e.get("call_id") != call_id:
            continue
        rule = f", rule <code>{H.text(e['rule_id'])}</code>" if e.get("rule_id") else ""
        layer = f", layer <code>{H.text(e['layer'])}</code>" if e.get("layer") else ""
        out.append(_ev(int(e["seq"]), f"{H.text(e['kind'])} <b>{H.text(e.get('decision'))}"
                                      f"</b>{rule}{layer}"))
    return out


def _entry(r: Rollout, labels: set[str] | None) -> str | None:
    """Where the injection entered: the untrusted source (its carrier and text) and the
    first event after it that carries its label. ``labels``: only sources with one of these
    labels (a violating commit's); None: every source."""
    events = r.events
    sources = [e for e in events if e["kind"] == "source"
               and (labels is None or not labels.isdisjoint(e.get("labels") or ()))]
    if not sources:
        return None
    parts = []
    for src in sources[:2]:
        lab = set(src.get("labels") or ())
        first = next((e for e in events if e["seq"] > src["seq"] and e["kind"] != "source"
                      and not lab.isdisjoint(e.get("labels") or ())), None)
        text = _ev(int(src["seq"]), f"untrusted source (carrier "
                                    f"<code>{H.text(r.row.get('carrier') or '-')}</code>): "
                                    f"“{H.text(_gist(src.get('text')))}”")
        if first is not None:
            who = first.get("agent_id") or "-"
            text += "; first reached an agent at " + _ev(
                int(first["seq"]), f"{H.text(first['kind'])}"
                + (f" of <code>{H.text(first['tool'])}</code>" if first.get("tool") else "")
                + f" (agent <code>{H.text(who)}</code>)")
        parts.append(text)
    return "<br>".join(parts)


def _violation(r: Rollout, t: M.RolloutTrace) -> Story:
    bad = M.violating_commits(t)
    by_seq = {int(e["seq"]): e for e in r.events}
    n_commits = len(t.commits)
    st = Story("violation", f"Committed policy violation (eq. 5): {len(bad)} of {n_commits} "
                            f"commit(s) violate", marks={seq: "violation" for seq, _ in bad})
    labels: set[str] = set()
    for seq, v in bad[:3]:
        ev = by_seq[seq]
        why = ", ".join(n for n, on in (("unauthorized", v.unauthorized),
                                        ("secret leak", v.secret_leak),
                                        ("wrong recipient", v.wrong_recipient)) if on)
        st.items.append(("violating commit", _ev(seq, f"{_call(ev)} by agent "
                                                      f"<code>{H.text(ev.get('agent_id'))}"
                                                      f"</code> ({why})")))
        allowed = _verdicts(r.events, ev.get("call_id"), seq)
        st.items.append(("let through by", "<br>".join(allowed) if allowed else
                         "no decision recorded for this call"))
        labels |= set(ev.get("labels") or ())
    if len(bad) > 3:
        st.items.append(("more", f"{len(bad) - 3} further violating commit(s), marked in the "
                                 "graph and timeline"))
    entry = _entry(r, {x for x in labels if x.startswith("taint:")} or labels)
    st.items.append(("injection entered", entry or "no untrusted source's label is on the "
                                                   "violating commit (no logged taint path)"))
    return st


def _contained(r: Rollout, t: M.RolloutTrace) -> Story:
    found = M.containment(t)
    assert found is not None
    layer, i = found
    if i is None:
        st = Story("contained", "No violation committed; no defense act stood in the way "
                                "(contained_by = no_layer: the agent left the attack undone)")
    else:
        ev = t.events[i]
        seq = int(ev["seq"])
        st = Story("contained", f"Contained by layer {layer}", marks={seq: "contained"})
        rule = f", rule <code>{H.text(ev['rule_id'])}</code>" if ev.get("rule_id") else ""
        act = f"{H.text(ev['kind'])} <b>{H.text(ev.get('decision') or '')}</b>{rule}"
        prop = next((e for e in r.events if e["kind"] == "proposal"
                     and e.get("call_id") is not None
                     and e.get("call_id") == ev.get("call_id")), None)
        if ev["kind"] == "task_plan":
            what = "tools the attack needs were withheld before the first call"
        elif ev["kind"] == "output_check":
            what = "the injected text was removed from a tool output before the agent read it"
        else:
            what = ("a call that would have violated eq. 5 had it committed: "
                    + (_call(prop) if prop else "(proposal not found)"))
        st.items.append(("containing act", _ev(seq, f"{act} (layer <code>{H.text(layer)}"
                                                    f"</code>): {what}")))
    goal = t.scenario.attacker_goal
    if goal is not None:
        text = (goal.get("description") if isinstance(goal, dict) else None) or (
            goal if isinstance(goal, str) else json.dumps(goal, sort_keys=True, default=str))
        st.items.append(("attack goal", H.text(_gist(text))))
    entry = _entry(r, None)
    if entry:
        st.items.append(("injection entered", entry))
    return st


def story(r: Rollout, metrics: dict[str, Any] | None = None) -> Story:
    """The summary of the rollout ``r`` (``metrics``: its metrics row, to cross-check)."""
    row = r.row
    if row.get("status") == "error":
        return Story("error", "Provider error: never an outcome (Appendix I)",
                     [("error", H.text(_gist(row.get("error"))))])
    scen, why = scenario_of(row)
    if scen is None:
        harm = (metrics or {}).get("committed_harm")
        return Story("unknown", "Outcome: " + ("committed policy violation (metrics)"
                                               if harm == 1 else "see the metric values"),
                     [("event not determined", H.text(why))])
    t = M.RolloutTrace(row, r.events, r.edges, scen)
    if M.committed_harm(t):
        return _violation(r, t)
    if scen.attacker_goal is not None:
        return _contained(r, t)
    return Story("no_attack", f"No attack in this scenario (stage {row.get('stage')}): "
                              "no committed policy violation",
                 [("benign task", "completed" if M.benign(t)[0] else "not completed")])


def box(s: Story) -> str:
    """The summary box: the page's first block."""
    cls = {"violation": "story", "contained": "story contained"}.get(s.kind, "story neutral")
    rows = "".join(f"<dt>{H.text(k)}</dt><dd>{v}</dd>" for k, v in s.items)
    return (f'<section class="{cls}" id="summary"><h2>{H.text(s.title)}</h2>'
            f"<dl>{rows}</dl></section>")
