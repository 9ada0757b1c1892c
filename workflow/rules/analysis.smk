from containmentbench.report.items import ANALYSIS_TABLES, FIGURES


rule analysis:
    input:
        metrics=rules.metrics.output,
        reparse=rules.reparse.output.summary,
    output:
        S.path("analysis.json"),
        tables=report(S.paths("tables", "{}.csv", ANALYSIS_TABLES), category="Tables"),
        figures=report(S.paths("figures", "{}.png", FIGURES), category="Figures"),
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
        "containmentbench analyze {input.metrics:q} --out {params.out:q} --config {params.config:q} --reparse {input.reparse:q} > {log:q} 2>&1"
