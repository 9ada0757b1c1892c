"""What the Snakefile needs from the package: the composed study (one run per model), its
rollout jobs and outputs, resources from the ``cluster`` group, and the pre-flight checks
(config validated, resolved config saved and hashed per run, corrupt shards reported and set
aside to be redone, job markers whose shards are no longer all finished withdrawn).

Paths: ``S.path(*parts)`` is ``results/<study>/{model}/<parts>``: every rule's outputs carry
the ``{model}`` wildcard, so Snakemake builds each model's chain (rollout jobs -> reparse ->
metrics -> tables -> freeze/verify) separately; ``S.study_path`` is the study folder itself
(``cross_model/`` lives there)."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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
    shards,
    study_root,
)
from containmentbench.pipeline.planfile import save_plan
from containmentbench.pipeline.runs import load_runs
from containmentbench.trace.io import CHECKSUMS, verify_shard


def overrides_from(config: Mapping[str, Any]) -> list[str]:
    """``--config study=full_main overrides=[cluster=slurm,backend=vllm]`` -> overrides."""
    unknown = sorted(set(config) - {"study", "overrides"})
    if unknown:
        raise BenchError(f"unknown --config key '{unknown[0]}' (use study=... and "
                         f"overrides=[...])", field=unknown[0])
    raw = config.get("overrides", [])
    if isinstance(raw, str):  # YAML could not parse it (e.g. a nested list): split ourselves
        raw = split_overrides(raw)
    out = [str(x).strip() for x in raw]
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
    def __init__(self, config: Mapping[str, Any], main_process: bool = True,
                 dryrun: bool = False) -> None:
        self.runs = load_runs(overrides_from(config))
        self.data = self.runs[0]
        self.dir = study_root(self.data)
        self.name = self.data["study"]["name"]
        self.suite = self.data["study"]["suite"]
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
        self.shards: list[Shard] = []
        self.jobs: dict[str, list[Job]] = {}
        for slug, data in self._run.items():
            if self.adaptive:
                self.jobs[slug] = []
                continue
            sh = shards(data)
            self.shards += sh
            self.jobs[slug] = jobs(data, sh)
        self._by_id = {s.id: s for s in self.shards}
        if main_process:
            if not dryrun:  # a dry run reports and changes nothing (bytes and mtimes)
                from containmentbench.pipeline.locks import handle_stale_locks

                handle_stale_locks()
                if len(self.runs) > 1:  # the cross-model folder (Snakemake adds its logs/)
                    writer.ensure_dir(self.dir / "cross_model", "cross-model")
            for data in self.runs:
                if not dryrun:
                    from containmentbench.pipeline.legacy import adopt_run

                    adopt_run(run_dir(data), data)  # a run folder from before records
                    writer.ensure_dir(run_dir(data), "run")  # analyze --out accepts it
                    save_resolved(data, run_dir(data) / "config.yaml", force=True)
                    if not self.adaptive:
                        # each rollout job reads its shards from here, not from the suite
                        save_plan(data, run_dir(data) / "config.yaml",
                                  [s for s in self.shards if s.model == model_slug(data)])
                if self.adaptive:
                    continue
                self.quarantine_corrupt(data, report_only=dryrun)
                self.withdraw_stale_jobs(data, report_only=dryrun)

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
        only when every shard of its job is finished)."""
        return lambda w: self.job_outputs(w.model)

    def all_models(self, *parts: str) -> list[str]:
        """``parts`` inside every run directory (e.g. the per-model MANIFEST.json)."""
        return [str(run_dir(d).joinpath(*parts)) for d in self.runs]

    def targets(self) -> list[str]:
        out = self.all_models("MANIFEST.json")
        if self.multi_model:
            out.append(self.study_path("cross_model", "MANIFEST.json"))
        return out

    def job(self, w: Any) -> Job:
        for j in self.jobs.get(w.model, []):
            if j.name == w.job:
                return j
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

        return hashlib.sha256(resolved_text(self._run[w.model]).encode()).hexdigest()

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

    # ------------------------------------------------------------------ pre-flight

    # outputs computed from every shard of a run: when a shard is redone they must be rebuilt
    # in the same run (Snakemake does not look upstream of a finished study's present outputs)
    DERIVED = ("metrics/rollout_metrics.parquet", "reparse/summary.json",
               "reparse/reparse.parquet", "analysis.json", "MANIFEST.json")

    def quarantine_corrupt(self, data: dict[str, Any], report_only: bool = False) -> list[str]:
        """A finished shard whose bytes no longer match its checksums (or whose
        ``SHA256SUMS`` is empty or malformed) is reported and moved to ``quarantine/`` (kept,
        never deleted) so the DAG redoes it; when any shard of the run is missing, the
        outputs derived from all shards are moved aside too, so they are rebuilt in the same
        run. A dry run only reports."""
        moved = []
        root = run_dir(data)
        run_shards = shards(data)
        for s in run_shards:
            d = root / "traces" / s.id
            if not (d / CHECKSUMS).exists():
                continue
            bad = verify_shard(d)
            if not bad:
                continue
            what = ", ".join(Path(b).name for b in bad)
            if report_only:
                print(f"containmentbench: corrupt shard {s.id} ({what}); a real run "
                      f"quarantines it and redoes it with everything downstream",
                      file=sys.stderr)
                moved.append(s.id)
                continue
            for f in sorted(p for p in d.iterdir() if p.is_file()):
                writer.replace_in_study(f, kind="quarantine")  # journalled in a frozen study
            target = writer.move_aside(d, _free(root / "quarantine" / s.id))
            print(f"containmentbench: corrupt shard {s.id} ({what} does not match "
                  f"{CHECKSUMS}); moved to {target}; it will be redone", file=sys.stderr)
            moved.append(s.id)
        missing = any(not (root / "traces" / s.id / CHECKSUMS).exists() for s in run_shards)
        if missing and not report_only:
            self.set_aside_derived(root)
        return moved

    def set_aside_derived(self, root: Path) -> Path | None:
        """Move a run's present all-shard outputs to ``quarantine/derived.<n>/`` (kept)."""
        present = [rel for rel in self.DERIVED if (root / rel).is_file()]
        if not present:
            return None
        target = _free(root / "quarantine" / "derived")
        for rel in present:
            writer.replace_in_study(root / rel, kind="quarantine")
            writer.move_aside(root / rel, target / rel)
        print(f"containmentbench: shards are missing or were quarantined; {len(present)} "
              f"derived output(s) moved to {target} so this run rebuilds them",
              file=sys.stderr)
        return target

    def withdraw_stale_jobs(self, data: dict[str, Any], report_only: bool = False
                            ) -> list[str]:
        """A job marker stands for "every shard of the job finished": when a shard has gone
        (quarantined, deleted) the marker is removed so Snakemake reruns the job, which
        redoes only that shard."""
        from containmentbench.runtime.job import shard_is_current

        out = []
        for j in self.jobs[model_slug(data)]:
            marker = job_marker(data, j)
            if marker.exists() and not all(shard_is_current(data, s) for s in j.shards):
                out.append(j.name)
                if not report_only and not writer.remove_owned(marker, "job-marker"):
                    writer.move_aside(marker, _free(marker.parent / ".withdrawn" / marker.name))
        return out


def _free(base: Path) -> Path:
    n = 0
    while (cand := base.with_name(f"{base.name}.{n}")).exists():
        n += 1
    return cand


# Snakemake options that only inspect (dry run, summaries, graphs, lint, unlock, touch):
# ``workflow.dryrun`` is still False while the Snakefile is parsed (the executor is chosen
# later), so the pre-flight reads the command line to change nothing for these.
INSPECT_ONLY = {"--dry-run", "--dryrun", "--touch", "--summary", "--detailed-summary",
                "--list-rules", "--list", "--list-target-rules", "--lt", "--dag", "--rulegraph",
                "--filegraph", "--d3dag", "--lint", "--unlock", "--list-changes", "--lc",
                "--list-input-changes", "--li", "--list-params-changes", "--lp",
                "--list-code-changes", "--list-untracked", "--lu", "--cleanup-metadata",
                "--cm", "--delete-all-output", "--delete-temp-output", "--archive",
                "--print-compilation", "--export-cwl", "--report", "--containerize",
                "--generate-unit-tests", "--conda-create-envs-only", "--create-envs-only"}
_NO_VALUE_SHORT = set("npqrFfktTS")


def inspect_only(argv: Sequence[str]) -> bool:
    """Whether a Snakemake command line only inspects (``-n``, ``-np``, ``--dag`` ...)."""
    for a in argv:
        if a == "--":
            break
        if a.split("=", 1)[0] in INSPECT_ONLY:
            return True
        if len(a) > 1 and a[0] == "-" and a[1] != "-" and a[1:].isalpha() \
                and set(a[1:]) <= _NO_VALUE_SHORT and set(a[1:]) & {"n", "t"}:
            return True
    return False


def setup(config: Mapping[str, Any], main_process: bool = True, dryrun: bool = False) -> Study:
    """Build the study or exit with a one-line error (exit 2) before any job is submitted."""
    dryrun = dryrun or inspect_only(sys.argv[1:])
    try:
        return Study(config, main_process, dryrun)
    except BenchError as exc:
        print(f"containmentbench: error: {exc.render()}", file=sys.stderr)
        raise SystemExit(2) from None

