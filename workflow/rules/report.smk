# Case studies (paper 000 Appendix D), the integrity and safety audit (Appendix L, Table 28)
# and the static HTML report; the report is built after the provenance audit (it shows
# audit/tables/) and before freeze, which hashes it.
from containmentbench.report.items import CASE_TABLES


# before the analysis (rule tables), whose results.parquet holds their numbers too
rule cases:
    input:
        metrics=rules.metrics.output,
    output:
        tables=update(report(S.paths("tables", "{}.csv", CASE_TABLES), category="Case studies")),
        steps=update(S.path("tables", "case_studies_steps.json")),
    log:
        S.path("logs", "cases.log"),
    params:
        run=lambda w, output: os.path.dirname(os.path.dirname(output.steps)),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "containmentbench cases {params.run:q} --force > {log:q} 2>&1"


rule report:
    input:
        rules.cases.output,
        rules.audit.output,
        analysis=rules.tables.output[0],
    output:
        update(report(directory(S.path("report")), htmlindex="index.html",
                      category="Study report", caption="../report/caption.rst")),
    log:
        S.path("logs", "report.log"),
    params:
        run=lambda w, input: os.path.dirname(input.analysis),
    # the last step before freeze, alone on the machine: its trace pages take two processes
    # (the same bytes with one: tests/speed/test_paths_identical.py)
    threads: 2
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "containmentbench report {params.run:q} --before-freeze --out {output:q} --force --workers {threads} > {log:q} 2>&1"
