rule metrics:
    input:
        S.all_shard_outputs(),
    output:
        S.path("metrics", "rollout_metrics.parquet"),
    log:
        S.path("logs", "metrics.log"),
    params:
        traces=lambda w, input: S.traces_root(input),
    threads: S.cluster["metrics_workers"]
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "containmentbench metrics {params.traces:q} --out {output:q} --force --workers {threads} > {log:q} 2>&1"
