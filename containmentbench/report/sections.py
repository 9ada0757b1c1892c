"""Where each table and figure goes in the report: paper order, figures beside the tables
they summarize, long or wide tables scrolling inside their own box.

``ORDER`` is the paper's order (paper 000 Tables 3, 9-15, 17-19, 22, 24-26, then the
appendix tables); a table not listed (a new one) follows in name order, so nothing is ever
left out. ``FIGURE_OF`` places each figure beside the table it summarizes; a figure's source
table is folded under it. ``FOLDED`` tables are diagnostics a reader opens on demand.
"""

from __future__ import annotations

from pathlib import Path

ORDER = ("table03_stage_accounting", "table09_security_positive_control",
         "table10_trajectory_divergence", "table11_utility", "table12_claim_critical",
         "table13_stage_contribution", "table14_denominator_sensitivity",
         "table15_memory_recovery", "table17_policy_aware_stress",
         "table18_candidate_transfer", "table19_adaptive_qualification", "adaptive_funnel",
         "table22_interface_diagnostic", "table24_parser_reparse",
         "table25_paired_comparisons", "table26_seed_variance", "exposure_validity",
         "utility_by_topology",
         "target_path_funnel", "zero_event_bounds", "rule_attribution",
         "table28_integrity_audit", "case_studies", "cross_model_by_defense", "stage_means")
TITLES = {
    "table03_stage_accounting": "Table 3: evidence stages",
    "table09_security_positive_control": "Table 9: security positive control",
    "table10_trajectory_divergence": "Table 10: outcome-conditioned trajectory divergence",
    "table11_utility": "Table 11: utility",
    "table12_claim_critical": "Table 12: claim-critical paired comparisons",
    "table13_stage_contribution": "Table 13: stage contribution to the logged-spread gap",
    "table14_denominator_sensitivity": "Table 14: denominator sensitivity",
    "table15_memory_recovery": "Table 15: memory and recovery",
    "table17_policy_aware_stress": "Table 17: policy-aware stress slice",
    "table18_candidate_transfer": "Table 18: adaptive candidate transfer",
    "table19_adaptive_qualification": "Table 19: adaptive qualification",
    "adaptive_funnel": "Adaptive replay funnel",
    "table22_interface_diagnostic": "Table 22: model-interface diagnostic",
    "table24_parser_reparse": "Table 24: parser reparse",
    "table25_paired_comparisons": "Table 25: paired comparisons",
    "table26_seed_variance": "Table 26: seed variance",
    "exposure_validity": "Exposure and measurement validity per defense",
    "utility_by_topology": "Utility per topology",
    "target_path_funnel": "Target-path funnel",
    "zero_event_bounds": "Zero-event upper bounds",
    "rule_attribution": "Rule-level attribution",
    "table28_integrity_audit": "Table 28: integrity and safety audit",
    "case_studies": "Table 21: case studies",
    "cross_model_by_defense": "Cross-model paired deltas per defense",
    "stage_means": "Stage x defense means of every metric",
    "findings": "Findings per defense",
}
#: figure stem -> the table it sits beside
FIGURE_OF = {"fig04_operating_points": "table09_security_positive_control",
             "fig03_authorized_completion": "table11_utility",
             "fig06_memory_recovery": "table15_memory_recovery",
             "fig05_boundary_vs_ledger": "table25_paired_comparisons"}
FOLDED = ("stage_means", "table26_seed_variance", "zero_event_bounds",
          "table24_parser_reparse", "exposure_validity", "table28_integrity_audit")


def ordered(paths: list[Path]) -> list[Path]:
    """``paths`` (tables/*.parquet) in paper order, unknown names last by name."""
    rank = {n: i for i, n in enumerate(ORDER)}
    return sorted(paths, key=lambda p: (rank.get(p.stem, len(ORDER)), p.stem))


def title(stem: str) -> str:
    return TITLES.get(stem, stem.replace("_", " "))


def figures_beside(figures: list[Path], tables: list[Path]) -> tuple[dict[str, list[Path]],
                                                                    list[Path]]:
    """(table stem -> figures placed beside it, figures with no table here)."""
    stems = {p.stem for p in tables}
    beside: dict[str, list[Path]] = {}
    alone = []
    for f in figures:
        t = FIGURE_OF.get(f.stem)
        if t in stems:
            beside.setdefault(t, []).append(f)
        else:
            alone.append(f)
    return beside, alone
