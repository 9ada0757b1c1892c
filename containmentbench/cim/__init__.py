"""Delegation forensics over CIM telemetry (paper 002, "Observability for Delegated Execution
in Agentic AI Systems").

The gateway binds every tool call of a rollout to a delegation (§6); this package makes that
telemetry a product: the Table 8 event envelope (``schema``), lossless projection of rollout
traces (``project``, ``export``) with OTLP/JSON (``otel``) and a hash chain (``chain``), a
prunable store with a lineage side table (``store``, ``lineage``), the forensic queries of
§4.2.1 and §5 (``queries``, ``divergence``, ``drift``), the reconstruction baselines and
metrics of §7.2 (``reconstruct``), the six-query suite and its plans (``suite``,
``plans``; Tables 6, 7, 9), seeded synthetic telemetry at Table 4 scale (``generator``,
``synth``), and Table 5-7 reports (``overhead``, ``report``). Modules are imported where used so ``containmentbench --help`` stays fast.
See docs/cim.md.
"""
