# One job loads the backend once and runs a group of shards (cluster.rollout_group, default
# one seed of one model); each shard is written atomically with its own SHA256SUMS, so a
# killed job redoes only its unfinished shards. The output marker exists only when every
# shard of the job is finished. The log gets every line; the job's progress (done/total, rate,
# ETA) also reaches the terminal of the Snakemake run (fd 3, the rule's own stderr).
rule rollout:
    input:
        rules.scenarios.output,
    output:
        S.path("jobs", "{job}.done"),
    log:
        S.path("logs", "rollout", "{job}.log"),
    params:
        config=S.config_path,
        job=lambda w: w.job,
        key=S.key,
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.gpu_rule_resources(),
    shell:
        "containmentbench rollout --study-config {params.config:q} --job {params.job:q} --progress-fd 3 3>&2 > {log:q} 2>&1"
