rule reparse:
    input:
        S.all_shard_outputs(),
    output:
        summary=update(S.path("reparse", "summary.json")),
        actions=update(S.path("reparse", "reparse.parquet")),
    log:
        S.path("logs", "reparse.log"),
    params:
        traces=lambda w, input: S.traces_root(input),
        out=lambda w, output: os.path.dirname(output.summary),
        plan=S.plan_digest,  # every shard of the study's plan is read
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "containmentbench reparse {params.traces:q} --out {params.out:q} --force > {log:q} 2>&1"
