# The offline provenance audit (paper 001, NeuroTaint) of every trace of the run: DCPG, four
# evidence tiers, counterfactual replays in the sandbox, FIDES-style baseline, the
# logged-vs-audited gap table and the cost per execution unit. Reads traces only; writes
# <run dir>/audit/ (hashed by freeze, rebuilt by reproduce). On a labelled suite
# (study=taintbench) it also scores both detectors against the labels: P/R/F1 per family,
# per deciding tier, ablations, the sweep; a real backend's rollouts are replayed there too.
# The §4.3 judge is the study's study.audit.judge: `audit run` reads it from the run's
# config.yaml, and its identity's sha256 is a param (another judge reruns the audit; none
# adds no param).
rule audit:
    input:
        S.all_shard_outputs(),
    output:
        update(S.path("audit", "summary.json")),
    log:
        S.path("logs", "audit.log"),
    params:
        run_dir=lambda w, output: os.path.dirname(os.path.dirname(output[0])),
        plan=S.plan_digest,  # every shard of the study's plan is audited
        replay="real" if S.suite == "taintbench" else "auto",
        **S.audit_judge(),
    # one core: the audit runs beside metrics, reparse and cases rather than holding both
    # cores of a laptop run; its tables are identical at 1 and 2 BLAS threads (checked on
    # full_main)
    threads: 1
    # the longest step after the rollouts: it starts before reparse and the analysis chain
    # (it and they then share the cores; workflow/rules/metrics.smk runs first)
    priority: 10
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=6000),
    shell:
        "HF_HUB_OFFLINE=1 OMP_NUM_THREADS={threads} containmentbench audit run {params.run_dir:q} --force --replay {params.replay:q} "
        "> {log:q} 2>&1"
