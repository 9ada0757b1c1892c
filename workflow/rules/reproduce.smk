# A target, not part of `all`: `snakemake reproduce --config study=<study>`. It has no input
# from other rules, so it never schedules a rollout: it rebuilds reparse, metrics and tables
# from the cached traces, compares bytes with the frozen ones and verifies MANIFEST.json.
rule reproduce:
    log:
        S.path("logs", "reproduce.log"),
    params:
        study=S.path(),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "(containmentbench reproduce {params.study:q} && containmentbench verify {params.study:q}) > {log:q} 2>&1"
