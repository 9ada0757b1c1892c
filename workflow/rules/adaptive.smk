# The bounded adaptive candidate search (study.adaptive.enabled; paper 000 §6.3, Appendix B):
# family-disjoint splits -> bounded tree search (append-only query log; a killed search
# resumes from it) -> frozen, hashed candidates -> staged qualification (known-good,
# development, family-held-out) -> replay of the frozen candidates as a derived suite through
# standard rollout shards (every defense x the study's fresh seeds) -> metrics -> Tables 18-19
# -> freeze/verify. Everything lives in the model's run directory (S.path).
from pathlib import Path

from containmentbench.attacks.replay import TABLES as ADAPTIVE_TABLES
from containmentbench.attacks.settings import rule_key as adaptive_key


rule adaptive_splits:
    output:
        S.path("adaptive", "splits.json"),
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
        S.path("adaptive", "search", "candidates.json"),
    log:
        S.path("logs", "adaptive", "search.log"),
    params:
        config=S.config_path,
        key=lambda w: adaptive_key(S.run_data(w)),
        out=lambda w, output: os.path.dirname(output[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.gpu_rule_resources(),
    shell:
        "containmentbench search run --study-config {params.config:q} --splits {input.splits:q} --out {params.out:q} > {log:q} 2>&1"


rule adaptive_freeze_candidates:
    input:
        rules.adaptive_search.output,
    output:
        S.path("adaptive", "frozen", "candidates_manifest.json"),
    log:
        S.path("logs", "adaptive", "frozen.log"),
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
        search=rules.adaptive_search.output,
        frozen=rules.adaptive_freeze_candidates.output,
    output:
        S.path("adaptive", "qualification", "qualification.json"),
    log:
        S.path("logs", "adaptive", "qualification.log"),
    params:
        config=S.config_path,
        key=lambda w: adaptive_key(S.run_data(w)),
        search=lambda w, input: os.path.dirname(input.search[0]),
        frozen=lambda w, input: os.path.dirname(input.frozen[0]),
        out=lambda w, output: os.path.dirname(output[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.gpu_rule_resources(),
    shell:
        "containmentbench search qualify --study-config {params.config:q} --splits {input.splits:q} --search {params.search:q} --frozen {params.frozen:q} --out {params.out:q} > {log:q} 2>&1"


rule adaptive_replay:
    input:
        splits=rules.adaptive_splits.output,
        frozen=rules.adaptive_freeze_candidates.output,
        qualification=rules.adaptive_qualify.output,
    output:
        S.path("adaptive", "replay.done"),
    log:
        S.path("logs", "adaptive", "replay.log"),
    params:
        config=S.config_path,
        key=lambda w: adaptive_key(S.run_data(w)),
        frozen=lambda w, input: os.path.dirname(input.frozen[0]),
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.gpu_rule_resources(),
    shell:
        "containmentbench search replay --study-config {params.config:q} --splits {input.splits:q} --frozen {params.frozen:q} --out {output:q} > {log:q} 2>&1"


rule adaptive_metrics:
    input:
        rules.adaptive_replay.output,
    output:
        S.path("metrics", "rollout_metrics.parquet"),
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


rule adaptive_tables:
    input:
        metrics=rules.adaptive_metrics.output,
        qualification=rules.adaptive_qualify.output,
    output:
        report(S.paths("tables", "{}.csv", ADAPTIVE_TABLES), category="Tables"),
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
        S.path("audit", "summary.json"),
    log:
        S.path("logs", "audit.log"),
    params:
        run_dir=lambda w, output: os.path.dirname(os.path.dirname(output[0])),
    threads: 1
    conda:
        "../envs/containmentbench.yaml"
    resources:
        **S.cpu_rule_resources(mem_mb=6000),
    shell:
        "HF_HUB_OFFLINE=1 OMP_NUM_THREADS={threads} containmentbench audit run {params.run_dir:q} --force > {log:q} 2>&1"


rule adaptive_freeze:
    input:
        rules.adaptive_tables.output,
        rules.adaptive_audit.output,
    output:
        S.path("MANIFEST.json"),
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
