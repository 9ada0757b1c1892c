rule freeze:
    input:
        rules.tables.output[0],
        rules.report.output,
        rules.audit.output,
    output:
        update(S.path("MANIFEST.json")),
    log:
        S.path("logs", "freeze.log"),
    params:
        study=lambda w, input: os.path.dirname(input[0]),  # analysis.json's folder
        # the pre-flight rewrites the resolved config when it changes (e.g. a new default in
        # the schema): the manifest is then re-frozen rather than left naming the old bytes
        config=S.config_digest,
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "(containmentbench freeze {params.study:q} && containmentbench verify {params.study:q}) > {log:q} 2>&1"
