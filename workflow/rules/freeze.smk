rule freeze:
    input:
        rules.analysis.output[0],
        rules.report.output,
    output:
        S.path("MANIFEST.json"),
    log:
        S.path("logs", "freeze.log"),
    params:
        study=lambda w, input: os.path.dirname(input[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "(containmentbench freeze {params.study} && containmentbench verify {params.study}) > {log} 2>&1"
