"""FIDES-style IFC baseline (Costa et al. 2025, as characterised in paper 001 §5.1).

Source and sink labels plus structural paths only: a sink is flagged when a structural path
links it to a source exposure inside the same runtime. Labels are runtime-local: they are not
persisted with memory entries, so a lineage that survives only through a memory write and a
later read (asynchronous provenance reuse, paper 001 §2.3 E3) is lost. No content evidence and
no counterfactual: a path is taken as propagation.
"""

from __future__ import annotations

from containmentbench.audit.dcpg import Lineage


def fides_flags(lineage: Lineage) -> bool:
    return any("memory" not in lineage.vias[sid] for sid in lineage.paths)
