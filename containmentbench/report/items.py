"""The tables and figures every ``analyze`` run writes, declared as Snakemake ``report()``
items (so ``snakemake --report`` lists them). Tables that depend on the study's defenses or
suite (rule attribution, Tables 13, 14, 17, 24) are not listed: a declared output must
always exist. Figures are declared per study (``Study.figures``: a figure whose stage the
study lacks is not drawn); ``FIGURES`` are those of a study with every stage.
``tests/report/test_items.py`` checks the lists against a real analysis."""

from __future__ import annotations

ANALYSIS_TABLES = ("findings", "exposure_validity", "utility_by_topology", "stage_means",
                   "table03_stage_accounting", "table09_security_positive_control",
                   "table10_trajectory_divergence", "table11_utility", "table12_claim_critical",
                   "table15_memory_recovery", "table22_interface_diagnostic",
                   "table25_paired_comparisons", "table26_seed_variance", "zero_event_bounds")
FIGURES = ("fig03_authorized_completion", "fig04_operating_points", "fig05_boundary_vs_ledger",
           "fig06_memory_recovery")
CASE_TABLES = ("case_studies", "table28_integrity_audit")
