# ContainmentBench: scenarios -> rollout shards -> reparse -> metrics -> analysis -> freeze
# (rollout shards -> audit -> freeze: the offline provenance audit).
#
#   snakemake --cores 2 --config study=full_main                     (laptop, sim agent)
#   snakemake --profile slurm/profile --config study=full_main cluster=slurm backend=vllm \
#       model=qwen2_5_7b_instruct                                    (Slurm, vLLM)
#   snakemake reproduce --cores 2 --config study=full_main           (tables from cached traces)
# Every --config key is a Hydra override (the same strings as `containmentbench status
# study=... key=value`); a dotted key goes inside 'overrides=[study.seeds=[1],...]', or say
# `containmentbench run study=NAME study.seeds=[1] ...`, which takes them as written.
#
# The study is composed with Hydra (config/) and validated before anything runs; path and
# shard logic live in containmentbench.pipeline (unit-tested), every rule calls the CLI.
# Each model of the study is a run directory results/<study>/<model>/ with its own chain;
# results/<study>/cross_model/ compares them when the study lists several models.
import os
import sys

from snakemake.utils import min_version

from containmentbench.pipeline.snake import setup

min_version("9.0")


envvars:
    "PATH",


# Parsing writes nothing to the study: shards are checked, not moved. `dryrun` is Snakemake's
# own setting (-n in any spelling or from a profile); it only words the pre-flight's report.
S = setup(config, main_process=workflow.is_main_process,
          dryrun=workflow.dryrun or getattr(workflow.output_settings, "dryrun", False))
# rules call the `containmentbench` console script of the interpreter running Snakemake
_BIN = os.path.dirname(sys.executable)
os.environ["PATH"] = f"{_BIN}{os.pathsep}{os.environ.get('PATH', '')}"


onstart:
    # a real run only, with Snakemake's lock held, before the first job: save each run's
    # config and plan, quarantine corrupt and retire dropped shards (pipeline/preflight.py)
    S.start(touch=workflow.touch)


onsuccess:
    # the end of a run: each model's verified headline (findings with intervals, the claims
    # in words) and its report's path (report/summary.py)
    S.finish()


wildcard_constraints:
    model=S.model_constraint(),
    job=r"[^/]+",


if S.adapter:  # an external benchmark through the adapter (study=agentdojo)

    include: "workflow/rules/agentdojo.smk"
    include: "workflow/rules/reproduce.smk"

elif S.adaptive:  # the bounded adaptive candidate search (study=adaptive, adaptive_smoke)

    include: "workflow/rules/adaptive.smk"

else:

    include: "workflow/rules/scenarios.smk"
    include: "workflow/rules/rollout.smk"
    include: "workflow/rules/reparse.smk"
    include: "workflow/rules/metrics.smk"
    include: "workflow/rules/analysis.smk"
    include: "workflow/rules/audit.smk"
    include: "workflow/rules/report.smk"
    include: "workflow/rules/freeze.smk"
    include: "workflow/rules/reproduce.smk"
    include: "workflow/rules/cross_model.smk"


# every output a study manifest covers is flagged update(): Snakemake never deletes it, not
# before a job nor after a failed one (pipeline/snake.py: Study.kept_outputs)
S.kept_outputs(workflow.rules)


rule all:
    default_target: True
    input:
        S.targets(),
