"""One name per quantity: every reported metric has one key and one display name, table
aliases resolve to keys, and docs/metrics.md carries the glossary as the code has it."""

from __future__ import annotations

from pathlib import Path

from containmentbench.metrics import glossary as G
from containmentbench.metrics.schema import METRICS, STAGE_SCOPE

IDENTITY = {"rollout_id", "scenario_id", "cluster_id", "stage", "domain", "topology",
            "memory_mode", "carrier", "attack_goal", "study", "suite", "model", "backend",
            "agent_profile", "defense", "policy_hash", "method_version", "seed", "status",
            "decoding", "tool_mode", "tools_offered", "completion_digest", "rule_ids", "stop_rule_ids",
            "error_kind"}


def test_every_metric_column_has_one_entry():
    cols = {f.name for f in METRICS} - IDENTITY
    assert cols <= set(G.TERMS), sorted(cols - set(G.TERMS))
    displays = [t.display for t in G.TERMS.values()]
    assert len(displays) == len(set(displays))  # no two quantities share a name
    for k, t in G.TERMS.items():
        assert t.key == k and t.definition and t.denominator
        assert "_" not in t.display  # a display name is never snake_case


def test_aliases_and_display_names_resolve_to_one_key():
    for alias, key in G.ALIASES.items():
        assert key in G.TERMS, alias
        assert G.key_of(alias) == key and G.display(alias) == G.TERMS[key].display
    # the four names the issue found for one quantity
    for name in ("committed_harm", "policy_violation", "Committed policy violation",
                 "committed_violation"):
        assert G.key_of(name) == "committed_harm"
    assert G.key_of("blast_radius_norm [security]") == "blast_radius_norm"
    assert G.display("N") == "N" and G.key_of("comparison") is None
    assert G.TERMS["authorized_tainted_action_success"].stages == ("active_tainted",)
    assert G.TERMS["recovery_success"].stages == STAGE_SCOPE["recovery_success"]
    assert G.higher_is_better("clean_benign_completion")
    assert not G.higher_is_better("committed_harm")


def test_docs_carry_the_glossary():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    block = doc.split("<!-- glossary:start -->\n")[1].split("<!-- glossary:end -->")[0]
    assert block == G.markdown()
