"""What the Snakefile needs from the package: the composed study, its shards and outputs,
resources from the ``cluster`` group, and the pre-flight checks (config validated, resolved
config saved and hashed, corrupt shards reported and set aside to be redone)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from containmentbench.config.compose import load_study, save_resolved
from containmentbench.errors import BenchError
from containmentbench.pipeline.plan import Shard, shard_key, shards, study_dir
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
        self.data = load_study(overrides_from(config))
        self.dir = study_dir(self.data)
        self.name = self.data["study"]["name"]
        self.suite = self.data["study"]["suite"]
        self.cluster = self.data["cluster"]
        self.backend = self.data["backend"]["name"]
        self.adapter = (self.data["study"].get("adapter") or {}).get("name")  # §6.4 studies
        self.config_path = self.dir / "config.yaml"
        self.shards = shards(self.data)
        self._by_id = {s.id: s for s in self.shards}
        if main_process:
            if not dryrun:
                save_resolved(self.data, self.config_path)
            self.quarantine_corrupt(report_only=dryrun)

    # ------------------------------------------------------------------ paths

    def path(self, *parts: str) -> str:
        return str(self.dir.joinpath(*parts))

    def paths(self, sub: str, pattern: str, names: Sequence[str]) -> list[str]:
        """``S.paths("tables", "{}.csv", names)``: one path per name (report items)."""
        return [self.path(sub, pattern.format(n)) for n in names]

    def shard_output(self, s: Shard) -> str:
        return self.path("traces", s.id, CHECKSUMS)

    @staticmethod
    def traces_root(inputs: Sequence[str]) -> str:
        """The traces folder above shard outputs (``traces/<model>/<defense>/seed=<s>/
        <stage>/shard-<k>/SHA256SUMS``): a function of the inputs, so no rule hard-codes a
        path prefix."""
        return str(Path(inputs[0]).parents[5])

    def all_shard_outputs(self) -> list[str]:
        return [self.shard_output(s) for s in self.shards]

    @staticmethod
    def shard_id(w: Any) -> str:
        return f"{w.model}/{w.defense}/seed={w.seed}/{w.stage}/shard-{w.shard}"

    def shard(self, w: Any) -> Shard:
        try:
            return self._by_id[self.shard_id(w)]
        except KeyError:
            raise BenchError(f"no shard '{self.shard_id(w)}' in study '{self.name}'",
                             field="shard") from None

    def key(self, w: Any) -> str:
        return shard_key(self.data, self.shard(w))

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
        if self.backend == "openai":
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

    def quarantine_corrupt(self, report_only: bool = False) -> list[str]:
        """A finished shard whose bytes no longer match its checksums is reported and moved
        to ``quarantine/`` (kept, never deleted) so the DAG redoes it."""
        moved = []
        for s in self.shards:
            d = self.dir / "traces" / s.id
            if not (d / CHECKSUMS).exists():
                continue
            bad = verify_shard(d)
            if not bad:
                continue
            if report_only:
                print(f"containmentbench: corrupt shard {s.id}; a real run redoes it",
                      file=sys.stderr)
                moved.append(s.id)
                continue
            n = 0
            while (target := self.dir / "quarantine" / f"{s.id}.{n}").exists():
                n += 1
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(d, target)
            print(f"containmentbench: corrupt shard {s.id} ({', '.join(Path(b).name for b in bad)}"
                  f" differ from {CHECKSUMS}); moved to {target}; it will be redone",
                  file=sys.stderr)
            moved.append(s.id)
        return moved


def setup(config: Mapping[str, Any], main_process: bool = True, dryrun: bool = False) -> Study:
    """Build the study or exit with a one-line error (exit 2) before any job is submitted."""
    try:
        return Study(config, main_process, dryrun)
    except BenchError as exc:
        print(f"containmentbench: error: {exc.render()}", file=sys.stderr)
        raise SystemExit(2) from None

