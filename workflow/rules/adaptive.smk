# The bounded adaptive candidate search (study.adaptive.enabled; paper 000 §6.3, Appendix B):
# family-disjoint splits -> bounded tree searches (append-only query logs; a killed search
# resumes from its log): the paper's first, non-target-preserving search ("transfer", Table
# 18) and the target-preserving one ("target", Table 19) -> frozen, hashed candidates of each
# -> staged qualification of the target-preserving candidates (known-good, development,
# family-held-out) -> defense-specific optimization only if it passed -> replay of the
# protocol's frozen candidates as a derived suite through standard rollout shards (each group
# under its defenses, study.adaptive.table18_protocol) -> metrics -> Tables 18-19 ->
# freeze/verify. Everything lives in the model's run directory (S.path).
from pathlib import Path

from containmentbench.attacks.replay import TABLES as ADAPTIVE_TABLES
from containmentbench.attacks.settings import rule_key as adaptive_key
from containmentbench.attacks.settings import searches as adaptive_searches


wildcard_constraints:
    search="transfer|target",


rule adaptive_splits:
    output:
        update(S.path("adaptive", "splits.json")),
    log:
        S.path("logs", "adaptive", "splits.log"),
    params:
        config=S.config_path,
        key=lambda w: adaptive_key(S.run_data(w)),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "containmentbench search splits --study-config {params.config:q} --out {output:q} > {log:q} 2>&1"


rule adaptive_search:
    input:
        splits=rules.adaptive_splits.output,
    output:
        update(S.path("adaptive", "search", "{search}", "candidates.json")),
    log:
        S.path("logs", "adaptive", "search-{search}.log"),
    params:
        config=S.config_path,
        key=lambda w: adaptive_key(S.run_data(w)),
        out=lambda w, output: os.path.dirname(output[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.gpu_rule_resources(),
    shell:
        "containmentbench search run --study-config {params.config:q} --splits {input.splits:q} --search {wildcards.search:q} --out {params.out:q} > {log:q} 2>&1"


rule adaptive_freeze_candidates:
    input:
        S.path("adaptive", "search", "{search}", "candidates.json"),
    output:
        update(S.path("adaptive", "frozen", "{search}", "candidates_manifest.json")),
    log:
        S.path("logs", "adaptive", "frozen-{search}.log"),
    params:
        search=lambda w, input: os.path.dirname(input[0]),
        out=lambda w, output: os.path.dirname(output[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "containmentbench search freeze --search {params.search:q} --out {params.out:q} > {log:q} 2>&1"


rule adaptive_qualify:
    input:
        splits=rules.adaptive_splits.output,
        search=S.path("adaptive", "search", "target", "candidates.json"),
        frozen=S.path("adaptive", "frozen", "target", "candidates_manifest.json"),
    output:
        update(S.path("adaptive", "qualification", "qualification.json")),
    log:
        S.path("logs", "adaptive", "qualification.log"),
    params:
        config=S.config_path,
        key=lambda w: adaptive_key(S.run_data(w)),
        search=lambda w, input: os.path.dirname(input.search),
        frozen=lambda w, input: os.path.dirname(input.frozen),
        out=lambda w, output: os.path.dirname(output[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.gpu_rule_resources(),
    shell:
        "containmentbench search qualify --study-config {params.config:q} --splits {input.splits:q} --search {params.search:q} --frozen {params.frozen:q} --out {params.out:q} > {log:q} 2>&1"


rule adaptive_defense_specific:
    input:
        splits=rules.adaptive_splits.output,
        qualification=rules.adaptive_qualify.output,
    output:
        update(S.path("adaptive", "defense_specific", "decision.json")),
    log:
        S.path("logs", "adaptive", "defense_specific.log"),
    params:
        config=S.config_path,
        key=lambda w: adaptive_key(S.run_data(w)),
        qualification=lambda w, input: os.path.dirname(input.qualification[0]),
        out=lambda w, output: os.path.dirname(output[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.gpu_rule_resources(),
    shell:
        "containmentbench search defense-specific --study-config {params.config:q} --splits {input.splits:q} --qualification {params.qualification:q} --out {params.out:q} --force > {log:q} 2>&1"


rule adaptive_replay:
    input:
        splits=rules.adaptive_splits.output,
        frozen=expand(
            S.path("adaptive", "frozen", "{search}", "candidates_manifest.json"),
            search=adaptive_searches(S.data),
            allow_missing=True,
        ),
        decision=rules.adaptive_defense_specific.output,
    output:
        update(S.path("adaptive", "replay.done")),
    log:
        S.path("logs", "adaptive", "replay.log"),
    params:
        config=S.config_path,
        key=lambda w: adaptive_key(S.run_data(w)),
        adaptive=lambda w, input: str(Path(input.splits[0]).parent),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.gpu_rule_resources(),
    shell:
        "containmentbench search replay --study-config {params.config:q} --splits {input.splits:q} --adaptive {params.adaptive:q} --out {output:q} > {log:q} 2>&1"


rule adaptive_metrics:
    input:
        rules.adaptive_replay.output,
    output:
        update(S.path("metrics", "rollout_metrics.parquet")),
    log:
        S.path("logs", "metrics.log"),
    params:
        traces=lambda w, input: str(Path(input[0]).parents[1] / "traces"),
    threads: S.cluster["metrics_workers"]
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "containmentbench metrics {params.traces:q} --out {output:q} --force --workers {threads} > {log:q} 2>&1"


# after the provenance audit: results.parquet holds its numbers too (analysis/late.py)
rule adaptive_tables:
    input:
        metrics=rules.adaptive_metrics.output,
        qualification=rules.adaptive_qualify.output,
        audit=S.path("audit", "summary.json"),
    output:
        update(report(S.paths("tables", "{}.csv", ADAPTIVE_TABLES), category="Tables")),
    log:
        S.path("logs", "adaptive", "tables.log"),
    params:
        run=lambda w, input: str(Path(input.metrics[0]).parents[1]),
        qualification=lambda w, input: os.path.dirname(input.qualification[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "containmentbench search tables {params.run:q} --qualification {params.qualification:q} --force > {log:q} 2>&1"


# The provenance audit of the replay shards (paper 001): the frozen candidates' derived suite
# is a suite of our own scenarios inside the run directory, so its sim rollouts are replayed.
rule adaptive_audit:
    input:
        rules.adaptive_replay.output,
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


# the static HTML report (headline, Tables 18-19, the funnel, rollout index, trace pages),
# built before freeze, which hashes it
rule adaptive_report:
    input:
        rules.adaptive_tables.output,
        rules.adaptive_audit.output,
    output:
        update(report(directory(S.path("report")), htmlindex="index.html",
                      category="Study report", caption="../report/caption.rst")),
    log:
        S.path("logs", "report.log"),
    params:
        run=lambda w, input: str(Path(input[0]).parents[1]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "containmentbench report {params.run:q} --before-freeze --out {output:q} --force > {log:q} 2>&1"


rule adaptive_freeze:
    input:
        rules.adaptive_tables.output,
        rules.adaptive_report.output,
        rules.adaptive_audit.output,
    output:
        update(S.path("MANIFEST.json")),
    log:
        S.path("logs", "freeze.log"),
    params:
        study=lambda w, input: str(Path(input[0]).parents[1]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(),
    shell:
        "(containmentbench freeze {params.study:q} && containmentbench verify {params.study:q}) > {log:q} 2>&1"


# A target, not part of `all` (as reproduce.smk for the other studies): recompute the
# metrics and Tables 18-19 from the cached replay traces, compare bytes, verify.
rule reproduce:
    log:
        S.study_path("logs", "reproduce.log"),
    params:
        runs=S.run_dirs(),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=4000),
    shell:
        "(for d in {params.runs:q}; do containmentbench search reproduce \"$d\" && containmentbench verify \"$d\" || exit 1; done) > {log:q} 2>&1"
