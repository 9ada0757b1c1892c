# Only when the study lists several models: each model's metrics stay in its own run
# directory; this rule compares them per defense (paired by scenario and seed, scenario-
# cluster bootstrap), writes the comparison's headline and report (each model's headline
# side by side) and freezes them (cross_model/MANIFEST.json).
rule cross_model:
    input:
        metrics=expand(S.path("metrics", "rollout_metrics.parquet"), model=S.models),
        # each model frozen first: the report shows each verified headline side by side
        frozen=expand(S.path("MANIFEST.json"), model=S.models),
    output:
        update(S.study_path("cross_model", "MANIFEST.json")),
    log:
        S.study_path("cross_model", "logs", "cross_model.log"),
    params:
        config=S.all_models("config.yaml")[0],
        out=lambda w, output: os.path.dirname(output[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "(containmentbench cross-model {input.metrics:q} --out {params.out:q} --force --config {params.config:q} && containmentbench verify {params.out:q}) > {log:q} 2>&1"
