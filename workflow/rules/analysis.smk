from containmentbench.analysis.outputs import settings_digest
from containmentbench.report.items import ANALYSIS_TABLES, CASE_TABLES


# Sensitivity (Tables 13, 14, rule attribution) and bootstrap (every resampled interval) are
# cached apart; each reruns only when its own analysis settings (the digest), the metrics or
# the analysis layer's code change, so a bootstrap setting never recomputes the sensitivity
# part. Both feed `tables`.
rule sensitivity:
    input:
        metrics=rules.metrics.output,
    output:
        update(S.path("analysis", "sensitivity.json")),
    log:
        S.path("logs", "sensitivity.log"),
    params:
        config=S.config_path,
        digest=lambda w: settings_digest(S.run_data(w)["analysis"], "sensitivity"),
        code=S.code("analysis"),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "containmentbench sensitivity {input.metrics:q} --out {output:q} --force --config {params.config:q} > {log:q} 2>&1"


rule bootstrap:
    input:
        metrics=rules.metrics.output,
    output:
        update(S.path("analysis", "bootstrap.json")),
    log:
        S.path("logs", "bootstrap.log"),
    params:
        config=S.config_path,
        digest=lambda w: settings_digest(S.run_data(w)["analysis"], "bootstrap"),
        code=S.code("analysis"),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "containmentbench bootstrap {input.metrics:q} --out {output:q} --force --config {params.config:q} > {log:q} 2>&1"


# tables/results.parquet holds every number of every table: the case studies and Table 28
# (rule cases) and the provenance audit's tables (rule audit) are written first
# (analysis/late.py)
rule tables:
    input:
        metrics=rules.metrics.output,
        reparse=rules.reparse.output.summary,
        sensitivity=rules.sensitivity.output,
        bootstrap=rules.bootstrap.output,
        cases=S.paths("tables", "{}.csv", CASE_TABLES),
        audit=S.path("audit", "summary.json"),
    output:
        update(S.path("analysis.json")),
        tables=update(report(S.paths("tables", "{}.csv", ANALYSIS_TABLES), category="Tables")),
        figures=update(report(S.figures(), category="Figures")),
    log:
        S.path("logs", "analysis.log"),
    params:
        config=S.config_path,
        digest=lambda w: settings_digest(S.run_data(w)["analysis"], "tables"),
        code=S.code("analysis"),
        out=lambda w, output: os.path.dirname(output[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "containmentbench analyze {input.metrics:q} --out {params.out:q} --force --config {params.config:q} --reparse {input.reparse:q} --sensitivity {input.sensitivity:q} --bootstrap {input.bootstrap:q} > {log:q} 2>&1"
