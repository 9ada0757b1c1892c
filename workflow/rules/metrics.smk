rule metrics:
    input:
        S.all_shard_outputs(),
    output:
        update(S.path("metrics", "rollout_metrics.parquet")),
    log:
        S.path("logs", "metrics.log"),
    params:
        traces=lambda w, input: S.traces_root(input),
        config=S.config_path,
        # the study's plan (shard ids and keys) and the metric layer's code: a dropped
        # defense or a new metric definition rebuilds the metrics
        plan=S.plan_digest,
        code=S.code("metrics"),
    threads: S.cluster["metrics_workers"]
    # first when the rollouts are done: it takes every core it is given for a few seconds,
    # then the audit (the longest step) runs beside the chain metrics feeds
    priority: 20
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "containmentbench metrics {params.traces:q} --study-config {params.config:q} --out {output:q} --force --workers {threads} > {log:q} 2>&1"
