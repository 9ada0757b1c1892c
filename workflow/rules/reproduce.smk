# A target, not part of `all`: `snakemake reproduce --config study=<study>`. It has no input
# from other rules, so it never schedules a rollout: for every model's run directory it
# rebuilds reparse, metrics and tables from the cached traces, compares bytes with the
# frozen ones and verifies MANIFEST.json; with several models, the same for cross_model/.
# An adapter study (study=agentdojo) rebuilds its adapter metrics, parity and tables instead.
# The verdict of each step reaches the terminal as well as the log (tee; a failure still
# fails the rule: Snakemake's bash runs with pipefail).
rule reproduce:
    log:
        S.study_path("logs", "reproduce.log"),
    params:
        runs=S.run_dirs(),
        # adapter studies have no cross_model/ step (workflow/rules/agentdojo.smk)
        cross=S.study_path("cross_model") if S.multi_model and not S.adapter else "",
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "(for d in {params.runs:q}; do containmentbench reproduce \"$d\" && containmentbench verify \"$d\" || exit 1; done"
        " && for c in {params.cross:q}; do containmentbench cross-model --reproduce --out \"$c\" && containmentbench verify \"$c\"; done) 2>&1 | tee {log:q}"
