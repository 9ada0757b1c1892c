# An external-benchmark study (study.adapter.name: agentdojo; paper 000 §6.4): clean
# qualification per suite (eligible tasks frozen before the attacked matrix) -> one shard per
# (defense, seed, suite) through our gateway -> metrics -> parity counts -> analysis ->
# Table 20 (with the broader no-defense screen of the whole pool, when the study has screen
# seeds: its shards live under qualification/screen/, never pooled with the matrix) -> report
# -> freeze.
# Everything lives in the model's run directory (S.path: results/<study>/<model_slug>/...).
from containmentbench.adapters import rules as A


wildcard_constraints:
    seed=r"\d+",
    shard=r"\d{3}",
    suite=r"[^/]+",


rule adapter_qualify:
    output:
        update(S.path("qualification", "{suite}.json")),
    log:
        S.path("logs", "qualification", "{suite}.log"),
    params:
        config=S.config_path,
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "containmentbench adapters agentdojo-qualify --study-config {params.config:q} --suite {wildcards.suite:q} --out {output:q} > {log:q} 2>&1"


rule adapter_rollout:
    input:
        S.path("qualification", "{stage}.json"),
    output:
        update(S.path("traces", "{model}", "{defense}", "seed={seed}", "{stage}",
                      "shard-{shard}", "SHA256SUMS")),
    log:
        S.path("logs", "rollout", "{model}", "{defense}", "seed={seed}", "{stage}",
               "shard-{shard}.log"),
    params:
        config=S.config_path,
        shard=A.rule_shard_id,
        out=lambda w, output: os.path.dirname(output[0]),
        key=lambda w: A.rule_shard_key(S, w),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        # the ground truth needs no model: CPU jobs; a served model: the GPU/api_calls resources
        **(
            S.cpu_rule_resources()
            if S.data["study"]["adapter"]["pipeline"] == "ground_truth"
            else S.gpu_rule_resources()
        ),
    shell:
        "containmentbench adapters agentdojo --study-config {params.config:q} --shard {params.shard:q} --qualification {input:q} --out {params.out:q} > {log:q} 2>&1"


rule adapter_metrics:
    input:
        A.rule_shard_outputs(S),
    output:
        update(S.path("metrics", "rollout_metrics.parquet")),
    log:
        S.path("logs", "metrics.log"),
    params:
        traces=lambda w: A.rule_traces_dir(S, w),
    threads: S.cluster["metrics_workers"]
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "containmentbench adapters metrics {params.traces:q} --out {output:q} --force --workers {threads} > {log:q} 2>&1"


rule adapter_parity:
    input:
        A.rule_shard_outputs(S),
    output:
        update(S.path("adapter", "parity.json")),
    log:
        S.path("logs", "parity.log"),
    params:
        traces=lambda w: A.rule_traces_dir(S, w),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "containmentbench adapters parity {params.traces:q} --out {output:q} --force > {log:q} 2>&1"


# after Table 20 and the provenance audit: results.parquet holds their numbers too
# (analysis/late.py)
rule adapter_analysis:
    input:
        metrics=rules.adapter_metrics.output,
        parity=rules.adapter_parity.output,
        table20=S.path("tables", "table20_agentdojo_qualification.csv"),
        audit=S.path("audit", "summary.json"),
    output:
        update(S.path("analysis.json")),
    log:
        S.path("logs", "analysis.log"),
    params:
        config=S.config_path,
        out=lambda w, output: os.path.dirname(output[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "containmentbench analyze {input.metrics:q} --out {params.out:q} --force --config {params.config:q} > {log:q} 2>&1"


rule adapter_screen:
    input:
        S.path("qualification", "{suite}.json"),
    output:
        update(S.path("qualification", "screen", "{suite}", "screen.json")),
    log:
        S.path("logs", "qualification", "screen-{suite}.log"),
    params:
        config=S.config_path,
        out=lambda w, output: os.path.dirname(output[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **(
            S.cpu_rule_resources()
            if S.data["study"]["adapter"]["pipeline"] == "ground_truth"
            else S.gpu_rule_resources()
        ),
    shell:
        "containmentbench adapters agentdojo-screen --study-config {params.config:q} --suite {wildcards.suite:q} --out {params.out:q} --force > {log:q} 2>&1"


rule adapter_table20:
    input:
        metrics=rules.adapter_metrics.output,
        screens=expand(
            S.path("qualification", "screen", "{suite}", "screen.json"),
            suite=S.data["study"]["adapter"]["suites"]
            if S.data["study"]["adapter"].get("screen_seeds")
            else [],
            allow_missing=True,
        ),
    output:
        update(S.path("tables", "table20_agentdojo_qualification.csv")),
    log:
        S.path("logs", "table20.log"),
    params:
        run=lambda w, input: os.path.dirname(os.path.dirname(input.metrics[0])),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "containmentbench adapters table20 {params.run:q} --force > {log:q} 2>&1"


# The provenance audit of the adapter's traces (paper 001; containmentbench/audit/adapter.py):
# AgentDojo's sinks, content-built lineage, explicit tiers and the FIDES-style baseline; no
# replay (AgentDojo tasks are not our scenarios), so unattributed sinks are "not probed".
rule adapter_audit:
    input:
        A.rule_shard_outputs(S),
    output:
        update(S.path("audit", "summary.json")),
    log:
        S.path("logs", "audit.log"),
    params:
        run_dir=lambda w, output: os.path.dirname(os.path.dirname(output[0])),
        **S.audit_judge(),  # the study's judge (study.audit.judge): another reruns the audit
    threads: 1
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=6000),
    shell:
        "HF_HUB_OFFLINE=1 OMP_NUM_THREADS={threads} containmentbench audit run {params.run_dir:q} --force > {log:q} 2>&1"


# the static HTML report (headline, tables, rollout index, trace pages), before freeze
rule adapter_report:
    input:
        rules.adapter_table20.output,
        rules.adapter_audit.output,
        analysis=rules.adapter_analysis.output,
    output:
        update(report(directory(S.path("report")), htmlindex="index.html",
                      category="Study report", caption="../report/caption.rst")),
    log:
        S.path("logs", "report.log"),
    params:
        run=lambda w, input: os.path.dirname(input.analysis[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "containmentbench report {params.run:q} --before-freeze --out {output:q} --force > {log:q} 2>&1"


rule adapter_freeze:
    input:
        rules.adapter_analysis.output,
        rules.adapter_table20.output,
        rules.adapter_report.output,
        rules.adapter_audit.output,
    output:
        update(S.path("MANIFEST.json")),
    log:
        S.path("logs", "freeze.log"),
    params:
        study=lambda w, input: os.path.dirname(input[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "(containmentbench freeze {params.study:q} && containmentbench verify {params.study:q}) > {log:q} 2>&1"
