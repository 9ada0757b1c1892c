"""What the Snakefile needs from the package: the composed study (one run per model), its
rollout jobs and outputs, resources from the ``cluster`` group, the keys the rules carry as
``params``, and the pre-flight (``pipeline/preflight.py``): the config validated and every
shard checked while the Snakefile is parsed, writing nothing; the resolved config and plan
saved and corrupt or dropped shards moved aside only in Snakemake's ``onstart``, that is in a
real run that holds the lock.

Paths: ``S.path(*parts)`` is ``results/<study>/{model}/<parts>``: every rule's outputs carry
the ``{model}`` wildcard, so Snakemake builds each model's chain (rollout jobs -> reparse ->
metrics -> tables -> freeze/verify) separately; ``S.study_path`` is the study folder itself
(``cross_model/`` lives there)."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from containmentbench.canonical import sha256_json
from containmentbench.config.compose import save_resolved
from containmentbench.errors import BenchError
from containmentbench.integrity import writer
from containmentbench.pipeline.plan import (
    Job,
    Shard,
    job_key,
    job_marker,
    jobs,
    model_slug,
    run_dir,
    shard_key,
    shards,
    split_generation,
    study_root,
)
from containmentbench.pipeline.planfile import save_plan
from containmentbench.pipeline.preflight import (
    RunCheck,
    apply,
    check_run,
    repair_adapter_run,
    report,
)
from containmentbench.pipeline.runs import load_runs
from containmentbench.trace.io import CHECKSUMS

#: the modules whose code (with their imports) each layer's rules carry in their params
LAYERS = {"metrics": ("containmentbench.metrics.compute",),
          "analysis": ("containmentbench.analysis.run", "containmentbench.analysis.parts")}


def _render(v: Any) -> str:
    """A value Snakemake's ``--config`` parser made (int, float, bool, YAML list or mapping)
    written back as the Hydra override text it came from."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ",".join(_render(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{_render(x)}" for k, x in v.items()) + "}"
    return "null" if v is None else str(v)


def overrides_from(config: Mapping[str, Any]) -> list[str]:
    """``--config study=full_main backend=vllm 'overrides=[study.seeds=[1]]'`` -> the Hydra
    overrides ``study=full_main backend=vllm study.seeds=[1]``: every ``--config`` key is an
    override, the same strings as ``containmentbench status study=... key=value``. Snakemake
    refuses a dotted key (``study.seeds``) in ``--config``; such keys go inside
    ``overrides=[...]``."""
    raw = config.get("overrides", [])
    if isinstance(raw, str):  # YAML could not parse it (e.g. a nested list): split ourselves
        raw = split_overrides(raw)
    out = [f"{k}={_render(v)}" for k, v in config.items() if k not in ("study", "overrides")]
    out += [str(x).strip() for x in raw]
    if config.get("study"):
        out.insert(0, f"study={config['study']}")
    return out


def split_overrides(text: str) -> list[str]:
    """``[a=1,b.c=[1,2],d=x]`` -> ``["a=1", "b.c=[1,2]", "d=x"]`` (commas at bracket depth 0)."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


class Study:
    """The composed study, planned without writing anything (the pre-flight's changes wait
    for :meth:`start`, which the Snakefile's ``onstart`` handler calls in a real run)."""

    def __init__(self, config: Mapping[str, Any], main_process: bool = True,
                 dryrun: bool = False) -> None:
        self.runs = load_runs(overrides_from(config))
        self.data = self.runs[0]
        self.dir = study_root(self.data)
        self.name = self.data["study"]["name"]
        self.suite = self.data["study"]["suite"]
        from containmentbench.scenarios.manifest import suite_label

        # a file name for the suite's check record: a suite given as a folder
        # (study.suite=DIR, a built suite) is named by its folder
        self.suite_label = suite_label(self.suite)
        self.cluster = self.data["cluster"]
        self.backend = self.data["backend"]["name"]
        self.adapter = (self.data["study"].get("adapter") or {}).get("name")  # §6.4 studies
        # an adaptive candidate-search study (§6.3; workflow/rules/adaptive.smk): its rollout
        # shards are planned from the frozen candidates' derived suite by `search replay`,
        # not from the study's suite, so the pre-flight has no shards of its own to check
        self.adaptive = bool((self.data["study"].get("adaptive") or {}).get("enabled"))
        if self.adaptive:
            from containmentbench.attacks.settings import settings

            for data in self.runs:
                settings(data)  # budgets, strategies, seeds: before any job
        self.backends = {r["backend"]["name"] for r in self.runs}
        self.models = [model_slug(r) for r in self.runs]
        self._run = dict(zip(self.models, self.runs, strict=True))
        self.main_process = main_process
        self.shards: list[Shard] = []
        self.jobs: dict[str, list[Job]] = {}
        self.checks: dict[str, RunCheck] = {}
        self._plans: dict[str, str] = {}
        for slug, data in self._run.items():
            if self.adaptive:
                self.jobs[slug] = []
                continue
            sh = shards(data)
            self.shards += sh
            self.jobs[slug] = jobs(data, sh)
            if main_process and not self.adapter:
                check = check_run(data, self.jobs[slug])  # reads only
                self.checks[slug] = check
                self.jobs[slug] = check.jobs
                report(check, dryrun)
            elif main_process and not dryrun:
                # one shard per rule, no job markers (workflow/rules/agentdojo.smk)
                repair_adapter_run(data, sh)
        self._by_id = {s.id: s for s in self.shards}
        if main_process and not dryrun:
            probe_served_judge(self.data)
            from containmentbench.pipeline.locks import handle_stale_locks

            # before Snakemake takes its lock; touches .snakemake/ only, never the study
            handle_stale_locks()

    def start(self, touch: bool = False) -> None:
        """The pre-flight's writes, from the Snakefile's ``onstart`` handler: Snakemake runs
        it only in a real run, after taking its lock and before the first job (never in a
        dry run, never in a run the lock refuses). Saves each run's resolved config and plan,
        then quarantines, retires and restores shards as :func:`preflight.check_run` found.
        ``--touch`` only marks outputs current: it changes no file here."""
        if not self.main_process or touch:
            return
        try:
            self._start()
        except BenchError as exc:  # a study that refuses (a broken journal, a lock held)
            print(f"containmentbench: error: {exc.render()}", file=sys.stderr)
            raise SystemExit(2) from None

    def _start(self) -> None:
        self._set_aside_backups()
        self._lock()
        for data in self.runs:
            slug = model_slug(data)
            # force: the workflow's own run; in a frozen study the change is journalled
            save_resolved(data, run_dir(data) / "config.yaml", force=True)
            if self.adaptive:
                continue
            # each rollout job reads its shards from here, not from the suite
            save_plan(data, run_dir(data) / "config.yaml",
                      [s for s in self.shards if s.model == slug])
            if slug in self.checks:
                apply(data, self.checks[slug])

    def _lock(self) -> None:
        """Hold every run folder's study lock for the whole run (``integrity/atomic.py``):
        a command writing into one of them meanwhile is refused, and a run started while
        such a command writes stops here, one line, before any job. The jobs write under
        this run's lock (its token in their environment)."""
        import os
        import secrets

        from containmentbench.pipeline.legacy import adopt_run

        token = secrets.token_hex(8)
        folders = []
        if len(self.runs) > 1:  # the cross-model folder (Snakemake adds its logs/)
            folders.append(writer.ensure_dir(self.dir / "cross_model", "cross-model"))
        for data in self.runs:
            adopt_run(run_dir(data), data)  # a run folder written before ownership records
            folders.append(writer.ensure_dir(run_dir(data), "run"))  # analyze --out takes it
        for d in folders:
            writer.lock_study(d, token)
        os.environ[writer.ENV_PIPELINE] = token

    def _set_aside_backups(self) -> None:
        """Copies Snakemake made of this study's ``update`` outputs (``.snakemake/backups/``)
        that a killed run left: Snakemake cannot copy a folder output (the report) aside
        again while its old copy is there, and would restore the old copy when that fails.
        Moved to ``.snakemake/containmentbench-stale-backups/``, kept; the frozen bytes they
        hold are in the study or its ``.replaced-<n>/`` as well."""
        d = Path(self.dir)
        stale = Path(".snakemake") / "backups" / (d.relative_to(d.anchor) if d.is_absolute()
                                                  else d)
        if stale.exists():
            kept = writer.move_aside(stale, Path(".snakemake") / "containmentbench-stale-backups"
                                     / self.name)
            print(f"containmentbench: set aside Snakemake's copies of outputs left by a killed "
                  f"run ({kept})", file=sys.stderr)

    def finish(self) -> None:
        """From the Snakefile's ``onsuccess`` (a real run that ran jobs): every model's
        verified headline and report path, then the cross-model comparison
        (``report/summary.py``), so the terminal ends with the numbers, not only paths.
        ``CB_HEADLINE=0`` leaves it to the caller (``make run`` prints it itself, also when
        Snakemake had nothing to do)."""
        import os

        if not self.main_process or os.environ.get("CB_HEADLINE") == "0":
            return
        from containmentbench.report.summary import study_text

        cross = self.dir / "cross_model" if self.multi_model and not self.adapter else None
        print("\n" + study_text([run_dir(d) for d in self.runs], cross), flush=True)

    # ------------------------------------------------------------------ paths

    def path(self, *parts: str) -> str:
        """``results/<study>/{model}/<parts>``: a path inside one model's run directory."""
        return str(self.dir.joinpath("{model}", *parts))

    def study_path(self, *parts: str) -> str:
        return str(self.dir.joinpath(*parts))

    @property
    def multi_model(self) -> bool:
        return len(self.runs) > 1

    def model_constraint(self) -> str:
        return "|".join(re.escape(m) for m in self.models)

    def run_data(self, w: Any) -> dict[str, Any]:
        return self._run[w.model]

    def config_path(self, w: Any) -> str:
        """The resolved config of the run (a params function of the ``{model}`` wildcard)."""
        return str(run_dir(self._run[w.model]) / "config.yaml")

    def run_dirs(self) -> list[str]:
        return [str(run_dir(d)) for d in self.runs]

    def paths(self, sub: str, pattern: str, names: Sequence[str]) -> list[str]:
        """``S.paths("tables", "{}.csv", names)``: one path per name (report items)."""
        return [self.path(sub, pattern.format(n)) for n in names]

    def figures(self) -> list[str]:
        """The figures ``analyze`` draws for the study's stages that its suite holds (a
        figure whose stage the study or its suite lacks, as a user's built suite may, is not
        drawn, so it is not a declared output either)."""
        from containmentbench.analysis.outputs import figure_names

        stages = list(self.data["study"]["stages"])
        if not self.adapter and not self.adaptive:
            from containmentbench.scenarios.manifest import suite_index

            held = {st for st, _ in suite_index(self.suite)}
            stages = [st for st in stages if st in held]
        return self.paths("figures", "{}.png", figure_names(stages))

    def shard_output(self, s: Shard) -> str:
        return str(run_dir(self._run[s.model]) / "traces" / s.id / CHECKSUMS)

    @staticmethod
    def traces_root(inputs: Sequence[str]) -> str:
        """The traces folder of the run whose job markers (``<run>/jobs/<job>.done``) are the
        inputs: a function of the inputs, so no rule hard-codes a path prefix."""
        return str(Path(inputs[0]).parents[1] / "traces")

    def job_outputs(self, slug: str) -> list[str]:
        data = self._run[slug]
        return [str(job_marker(data, j)) for j in self.jobs[slug]]

    def all_shard_outputs(self) -> Any:
        """Input function: the rollout job markers of the ``{model}`` run (a marker exists
        only when every shard of its job is finished; a job to be redone asks for its next
        generation, so everything reading the markers is rebuilt after it)."""
        return lambda w: self.job_outputs(w.model)

    def all_models(self, *parts: str) -> list[str]:
        """``parts`` inside every run directory (e.g. the per-model MANIFEST.json)."""
        return [str(run_dir(d).joinpath(*parts)) for d in self.runs]

    def targets(self) -> list[str]:
        """Every run's MANIFEST.json and rollout job markers: a marker is a target so that a
        job to be redone (its next marker generation missing) runs even when everything
        downstream of it is present, and everything downstream is rebuilt after it."""
        out = self.all_models("MANIFEST.json")
        for slug in self.checks:
            out += self.job_outputs(slug)
        if self.multi_model:
            out.append(self.study_path("cross_model", "MANIFEST.json"))
        return out

    def job(self, w: Any) -> Job:
        """The job of the rule's ``{job}`` wildcard (``<name>`` or ``<name>.redo-<n>``)."""
        name, gen = split_generation(w.job)
        for j in self.jobs.get(w.model, []):
            if j.name == name:
                return replace(j, generation=gen)
        raise BenchError(f"no rollout job '{w.job}' for model '{w.model}' in study "
                         f"'{self.name}'", field="job")

    def key(self, w: Any) -> str:
        """The job's key (its shards' keys): a changed shard key reruns the job."""
        return job_key(self._run[w.model], self.job(w))

    def config_digest(self, w: Any) -> str:
        """sha256 of the run's resolved config as the pre-flight writes it (a params value of
        freeze): a config rewritten by a newer schema re-freezes the manifest even when no
        output changes, and a dry run says so (it reads the would-be text, not the file)."""
        import hashlib

        from containmentbench.config.compose import resolved_text

        data = self._run[w.model]
        text = resolved_text(data, run_dir(data) / "config.yaml")
        return hashlib.sha256(text.encode()).hexdigest()

    def plan_digest(self, w: Any) -> str:
        """sha256 of the run's plan: every shard id with its shard key (defenses, stages,
        seeds, scenario bytes, sim profile, settings). A params value of the rules that read
        every shard (metrics, reparse, audit): a study that drops, adds or redoes a shard
        rebuilds them, whatever Snakemake's rerun triggers."""
        if w.model not in self._plans:
            data = self._run[w.model]
            self._plans[w.model] = sha256_json(sorted(
                (s.id, shard_key(data, s)) for s in self.shards if s.model == w.model))
        return self._plans[w.model]

    def audit_judge(self) -> dict[str, str]:
        """The audit rule's ``judge`` param: the sha256 of the study's judge identity
        (``study.audit.judge``; audit/judge_config.py), so another judge reruns the audit
        (the rule's command reads the judge from the run's config.yaml). Empty without a
        judge: the rule's params are then those of a study written before the key existed,
        and its audit is not rerun."""
        from containmentbench.audit.judge_config import judge_identity
        from containmentbench.config.compose import study_judge

        cfg = study_judge(self.data)
        return {} if cfg is None else {"judge": judge_identity(cfg)["sha256"]}

    @staticmethod
    def code(layer: str) -> str:
        """The code version of the metric or analysis layer (``pipeline/content.py``): a
        params value of its rules, so new code rebuilds what it computes."""
        from containmentbench.pipeline.content import code_digest

        return code_digest(*LAYERS[layer])

    def kept_outputs(self, rules: Any) -> list[str]:
        """The outputs a study's manifest covers (and the manifests themselves), checked to
        carry Snakemake's ``update`` flag; called by the Snakefile once every rule is defined.

        Snakemake removes a job's outputs before the job runs and again when it fails ("since
        they might be corrupted"): a refused ``tables`` job in a frozen study lost 14 frozen
        files that way, with no copy in ``.replaced-<n>/``. An output flagged ``update`` is
        neither removed before the job nor after a failure (Snakemake copies it aside and
        copies it back when the job fails), so the verb itself decides: a frozen file is
        replaced only with ``--force``, its old bytes moved to ``.replaced-<n>/`` and the
        change journalled. A rule that lacks the flag on such an output stops the workflow
        before any job (one line, exit 2). Returns the flagged outputs."""
        from containmentbench.integrity.frozen import MANIFEST, is_covered_rel

        kept, bare = [], []
        for rule in rules:
            for f in rule.output:
                try:
                    parts = Path(str(f)).relative_to(self.dir).parts
                except ValueError:
                    continue
                inner = "/".join(parts[1:])  # below the run directory or cross_model/
                if inner != MANIFEST and not is_covered_rel(inner):
                    continue
                (kept if f.flags.get("update") else bare).append(f"{rule.name}: {f}")
        if bare:
            print(f"containmentbench: error: the rule output {bare[0]} is covered by the "
                  f"study's manifest but not flagged update() (Snakemake would delete it "
                  f"before the job and after a failure); {len(bare)} such output(s)",
                  file=sys.stderr)
            raise SystemExit(2)
        return kept

    # ------------------------------------------------------------------ resources

    def gpu_rule_resources(self) -> dict[str, Any]:
        """Resources of the rollout rule (the only GPU rule), attempt-scaled."""
        c = self.cluster
        res: dict[str, Any] = {
            "mem_mb": lambda wc, attempt: c["mem_mb_gpu_job"] * attempt,
            "runtime": lambda wc, attempt: c["runtime_min_gpu_job"] * attempt,
            "cpus_per_task": c["cpus_per_gpu_job"],
        }
        if c["executor"] == "slurm":
            res["slurm_partition"] = c["partition"]
            if c.get("account"):
                res["slurm_account"] = c["account"]
            if c["gpus_per_job"]:
                gres = f"gpu:{c['gpu_type']}:{c['gpus_per_job']}" if c.get("gpu_type") \
                    else f"gpu:{c['gpus_per_job']}"
                res["gres"] = gres
                res["gpu"] = c["gpus_per_job"]
        if "openai" in self.backends:
            res["api_calls"] = 1  # throttle a shared server: --resources api_calls=N
        return res

    def cpu_rule_resources(self, mem_mb: int | None = None) -> dict[str, Any]:
        c = self.cluster
        base_mem = mem_mb or c["mem_mb_cpu_job"]
        res: dict[str, Any] = {
            "mem_mb": lambda wc, attempt: base_mem * attempt,
            "runtime": lambda wc, attempt: c["runtime_min_cpu_job"] * attempt,
        }
        if c["executor"] == "slurm":
            res["slurm_partition"] = c.get("cpu_partition") or c["partition"]
            if c.get("account"):
                res["slurm_account"] = c["account"]
        return res


def probe_served_judge(data: dict[str, Any]) -> None:
    """The study's §4.3 judge asked its probe question before any job, when a server serves
    it (backend openai: one HTTP call): unreachable or malformed is one line naming the
    backend, exit 2, before ``onstart`` rewrites the run's config.yaml. An in-process judge
    (vllm, hf) is probed by the audit job itself (loading its engine here would hold every
    run's start); that job then fails the same way, its outputs untouched."""
    from containmentbench.config.compose import study_judge

    cfg = study_judge(data)
    if cfg is not None and cfg.backend == "openai":
        from containmentbench.audit.judge import Judge

        try:
            Judge.from_config(cfg).probe()
        except BenchError as exc:
            raise BenchError(exc.detail, field="study.audit.judge") from None


def setup(config: Mapping[str, Any], main_process: bool = True, dryrun: bool = False) -> Study:
    """Build the study or exit with a one-line error (exit 2) before any job is submitted.
    ``dryrun`` comes from Snakemake's own settings (the Snakefile passes
    ``workflow.output_settings.dryrun``: ``-n`` in any spelling or from a profile); it only
    words the pre-flight's report and keeps stale-lock handling out of dry runs, since the
    pre-flight writes nothing to the study before :meth:`Study.start`."""
    try:
        return Study(config, main_process, dryrun)
    except BenchError as exc:
        print(f"containmentbench: error: {exc.render()}{dotted_hint(exc, config)}",
              file=sys.stderr)
        raise SystemExit(2) from None


def dotted_hint(exc: BenchError, config: Mapping[str, Any]) -> str:
    """After an unknown key given to ``snakemake --config`` (``seeds=[1]``), the form that
    works there: the full key path goes inside ``'overrides=[...]'``, since Snakemake refuses
    a dotted ``--config`` key in its own argument parsing, before this Snakefile is read
    (a traceback no code here can word), or ``containmentbench run`` takes it as written."""
    if "full key path" not in exc.detail:
        return ""
    study = config.get("study") or "NAME"
    return (f"; in snakemake --config a dotted key goes inside 'overrides=[...]': snakemake "
            f"--config study={study} 'overrides=[study.seeds=[1]]', or say containmentbench "
            f"run study={study} study.seeds=[1]")

