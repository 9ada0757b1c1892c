# A target, not part of `all`: `snakemake reproduce --config study=<study>`. It has no input
# from other rules, so it never schedules a rollout: for every model's run directory it
# rebuilds reparse, metrics and tables from the cached traces, compares bytes with the
# frozen ones and verifies MANIFEST.json.
rule reproduce:
    log:
        S.study_path("logs", "reproduce.log"),
    params:
        runs=S.run_dirs(),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "(for d in {params.runs}; do containmentbench reproduce $d && containmentbench verify $d || exit 1; done) > {log} 2>&1"
