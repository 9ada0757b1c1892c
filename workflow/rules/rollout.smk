wildcard_constraints:
    seed=r"\d+",
    shard=r"\d{3}",


rule rollout:
    input:
        rules.scenarios.output,
    output:
        S.path("traces", "{model}", "{defense}", "seed={seed}", "{stage}", "shard-{shard}",
               "SHA256SUMS"),
    log:
        S.path("logs", "rollout", "{model}", "{defense}", "seed={seed}", "{stage}",
               "shard-{shard}.log"),
    params:
        config=S.config_path,
        shard=S.shard_id,
        out=lambda w, output: os.path.dirname(output[0]),
        key=S.key,
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.gpu_rule_resources(),
    shell:
        "containmentbench rollout --study-config {params.config:q} --shard {params.shard:q} --out {params.out:q} --force > {log:q} 2>&1"
