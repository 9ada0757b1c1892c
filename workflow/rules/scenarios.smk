rule scenarios:
    output:
        S.path("scenarios", f"{S.suite_label}.check.json"),
    log:
        S.path("logs", "scenarios.log"),
    params:
        suite=S.suite,
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "containmentbench scenarios check --suite {params.suite:q} --json > {output:q} 2> {log:q}"
