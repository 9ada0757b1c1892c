"""Compose, validate, hash and save the study configuration (Hydra Compose API).

Used by the CLI (``containmentbench config ...``, ``rollout --study-config``) and by the
Snakefile, so one composition decides what Snakemake fans out. Errors become one line naming
the key (exit 2) before any job is submitted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from containmentbench.canonical import sha256_json
from containmentbench.config.loader import config_dir
from containmentbench.errors import BenchError

STAGES = ("security", "memory_recovery", "active_tainted", "clean")
BACKENDS = ("sim", "vllm", "openai", "hf", "scripted")
REAL_BACKENDS = ("vllm", "openai", "hf")
EXECUTORS = ("local", "slurm")



def _hydra_error(exc: Exception) -> BenchError:
    """One line naming the key from a Hydra/OmegaConf composition or validation error."""
    parts = [" ".join(str(exc).split()) or type(exc).__name__]
    cause = exc.__cause__ or exc.__context__
    while cause is not None and len(parts) < 4:
        parts.append(" ".join(str(cause).split()) or type(cause).__name__)
        cause = cause.__cause__ or cause.__context__
    text = " ".join(parts)
    key = None
    for pat in (r"Error merging override ([\w.\[\]]+)=", r"Could not override '([^']+)'",
                r"full_key: ([\w.\[\]]+)", r"Key '([^']+)' (?:is )?not in",
                r"Could not find '([^'/]+)/"):
        m = re.search(pat, text)
        if m:
            key = m.group(1)
            break
    reason = parts[-1] if len(parts) > 1 else parts[0]
    for marker in ("Value '", "Key '", "Could not override", "Could not find",
                   "Could not append", "Could not delete"):
        i = text.find(marker)
        if i >= 0:
            reason = text[i:]
            break
    reason = re.split(r" full_key:| object_type=| Config search path| Available options",
                      reason)[0].strip()
    return BenchError(f"invalid configuration: {reason}{_hint(reason, key)}", field=key)


def _hint(reason: str, key: str | None) -> str:
    """The right form after a wrong one: a key Hydra does not know, an option it cannot
    find (``containmentbench list ...`` names them), an override without ``=``."""
    if "not in 'RootConfig'" in reason or "not in struct" in reason:
        return (" (an override names a group, e.g. backend=vllm, or a full key path, e.g. "
                "study.seeds=[1]; containmentbench config show study=NAME shows every key)")
    m = re.search(r"Could not find '(study|model|backend|defenses)/", reason)
    if m:
        kind = {"study": "studies", "model": "models", "backend": "backends",
                "defenses": "defenses"}[m.group(1)]
        return f" (containmentbench list {kind} names them)"
    if "missing EQUAL" in reason or "mismatched input" in reason:
        return " (an override is key=value, e.g. study=smoke backend=vllm)"
    return ""


#: the schema node a model without a config/model/NAME.yaml is composed from
UNLISTED_MODEL = "model_schema"


def plain_overrides(overrides: Sequence[str], directory: Path) -> tuple[list[str], str | None]:
    """Overrides as Hydra takes them, and the unlisted model they name (or None).

    The short forms a user types: ``base_url=URL`` is ``backend.options.base_url=URL``; a
    backend option needs no ``+`` (``backend.options.K=V`` adds or sets it; models/options.py
    refuses an option the backend does not know); ``model=NAME`` without a
    ``config/model/NAME.yaml`` is a model served by an OpenAI-compatible server, composed
    from the model schema with ``model.name=NAME`` (its served name comes from the server or
    ``model.path``: models/serving.py)."""
    out: list[str] = []
    unlisted = None
    for tok in overrides:
        key, eq, value = tok.partition("=")
        if eq and key == "base_url":
            out.append(f"++backend.options.base_url={value}")
        elif eq and key.startswith("backend.options.") and len(key) > len("backend.options."):
            out.append(f"++{tok}")
        elif (eq and key == "model" and value and value != UNLISTED_MODEL
              and re.fullmatch(r"[\w.:-]+", value)
              and not (directory / "model" / f"{value}.yaml").is_file()):
            unlisted = value
            out += [f"model={UNLISTED_MODEL}", f"model.name={value}"]
        else:
            out.append(tok)
    return out, unlisted


def compose(overrides: Sequence[str] = (), directory: str | Path | None = None) -> Any:
    """The composed (unresolved) DictConfig for ``overrides`` (:func:`plain_overrides`)."""
    from hydra import compose as hcompose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from containmentbench.config.schema import register

    register()
    GlobalHydra.instance().clear()
    d = Path(directory) if directory else config_dir()
    plain, unlisted = plain_overrides(overrides, d)
    try:
        with initialize_config_dir(config_dir=str(d.resolve()), version_base=None):
            cfg = hcompose(config_name="config", overrides=plain)
    except BenchError:
        raise
    except Exception as exc:  # hydra/omegaconf composition and validation errors
        raise _hydra_error(exc) from None
    finally:
        GlobalHydra.instance().clear()
    if unlisted is not None and cfg.backend.name != "openai":
        raise BenchError(f"no model '{unlisted}' in config/model (containmentbench list models "
                         f"names them); a model of your own is served by an OpenAI-compatible "
                         f"server: backend=openai base_url=URL model={unlisted} "
                         f"(docs/models.md)", field="model")
    return cfg


def _is_local_path(p: str) -> bool:
    return p.startswith(("/", "./", "../", "~"))


def validate(cfg: Any) -> dict[str, Any]:
    """Semantic checks; returns the resolved config as plain data."""
    from omegaconf import OmegaConf

    try:
        data = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except Exception as exc:
        raise _hydra_error(exc) from None
    study, model, backend = data["study"], data["model"], data["backend"]
    from containmentbench.config.bounds import check_bounds
    from containmentbench.config.keys import check_distinct, check_known
    from containmentbench.integrity.paths import check_dir, check_name

    check_known(data)  # no key the schema does not name (a '+key' override adds one)
    check_name(study["name"], "study.name")
    check_dir(data["results_dir"], "results_dir")
    check_bounds(data)
    check_distinct(data)
    if not study["seeds"]:
        raise BenchError("a study needs at least one seed", field="study.seeds")
    if not study["defenses"] and not data.get("defenses_file"):
        raise BenchError("a study needs at least one defense", field="study.defenses")
    for i, st in enumerate(study["stages"]):
        if st not in STAGES:
            raise BenchError(f"unknown stage '{st}' (known: {', '.join(STAGES)})",
                             field=f"study.stages[{i}]")
    from containmentbench.config.defenses import resolve_defenses

    resolve_defenses(data)  # a defenses file, stacks, the ablation grid; each one built
    if study["shard_size"] < 1:
        raise BenchError("must be >= 1", field="study.shard_size")
    if study.get("parser", "current") not in ("current", "legacy"):
        raise BenchError(f"unknown parser mode '{study['parser']}' (known: current, legacy)",
                         field="study.parser")
    from containmentbench.scenarios.toolsets import check_mode

    check_mode(study.get("tools_offered", "all"))
    if (study.get("adapter") or {}).get("name") and study.get("tools_offered", "all") != "all":
        raise BenchError("an adapter study offers the external benchmark's own tools; "
                         "tools_offered must be 'all'", field="study.tools_offered")
    if backend["name"] not in BACKENDS:
        raise BenchError(f"unknown backend '{backend['name']}' (known: {', '.join(BACKENDS)})",
                         field="backend.name")
    if backend["name"] in REAL_BACKENDS and is_sim_name(model["name"]):
        # a real backend asked to serve the simulated agent would send 'sim' to a model
        # server (or look for its weights) and label real rows with the sim's name
        raise BenchError(f"backend {backend['name']} serves a real model, but model "
                         f"'{model['name']}' is "
                         f"the simulated agent; say model=NAME (containmentbench list models), "
                         f"or use backend=sim", field="model.name")
    from containmentbench.models.base import TOOL_MODES
    from containmentbench.models.options import check_options

    if backend["name"] != "openai" and "base_url" in (backend.get("options") or {}):
        raise BenchError(f"base_url is where backend=openai finds its server, but the backend "
                         f"is {backend['name']}; say backend=openai", field="backend.options.base_url")
    check_options(backend["name"], backend.get("options") or {})
    if backend.get("tool_mode", "prompt") not in TOOL_MODES:
        raise BenchError(f"unknown tool_mode '{backend['tool_mode']}' "
                         f"(known: {', '.join(TOOL_MODES)})", field="backend.tool_mode")
    from containmentbench.config import decoding

    decoding.check(data)
    if backend["name"] in ("vllm", "hf"):
        path = model.get("path")
        if not path:
            raise BenchError(f"backend {backend['name']} needs a model with a path (say "
                             f"model=NAME; containmentbench list models)", field="model.path")
        from containmentbench.models.weights import is_packaged, verify_package

        if is_packaged(path):
            # installed, and its assembled bytes are the pinned ones (one line otherwise)
            verify_package(path)
        if _is_local_path(path) and not Path(os.path.expanduser(path)).exists():
            raise BenchError(f"model path '{path}' does not exist", field="model.path")
        from containmentbench.models.templates import check_local_template

        # native mode with a template that cannot render tools: refused here, before any job
        # (and again by the backend before its engine loads, for paths only a GPU node sees)
        check_local_template(path, backend.get("tool_mode", "prompt"))
    if backend["name"] == "sim" and model["name"] != "sim":
        raise BenchError(f"the sim backend runs the simulated agent, not model "
                         f"'{model['name']}'; use model=sim (or a real backend: backend=vllm)",
                         field="model.name")
    if backend["name"] == "sim":
        from containmentbench.models.sim import load_profile

        try:  # a profile that does not exist would only fail in the first rollout job
            load_profile(model.get("sim_profile") or "default")
        except BenchError as exc:
            raise BenchError(exc.detail, file=exc.file, field="model.sim_profile") from None
    from containmentbench.models.serving import check_keys

    check_keys(list(study.get("differ_in") or []), "study.differ_in")
    if not 0.0 <= float(study.get("max_error_rate", 0.0)) <= 1.0:
        raise BenchError("must be in [0, 1]", field="study.max_error_rate")
    from containmentbench.pipeline.plan import rollout_group
    rollout_group(data)  # a known cluster.rollout_group
    if data["cluster"]["executor"] not in EXECUTORS:
        raise BenchError(f"unknown executor '{data['cluster']['executor']}'",
                         field="cluster.executor")
    a = data["analysis"]
    if not 0 < float(a["confidence"]) < 1:
        raise BenchError("must be in (0, 1)", field="analysis.confidence")
    resolve_study_judge(data)
    from containmentbench.models.serving import resolve

    # last: the only check that may ask a server (the engine, its version, its template)
    resolve(data)
    return data


def resolve_study_judge(data: dict[str, Any]) -> None:
    """``study.audit.judge`` (schema.AuditStudyConfig) resolved in place to its settings
    mapping (a name or path read now: the run's config records what judged, not a name whose
    file may change); a section holding no judge is dropped, so a study without one keeps
    its config bytes, hash and Snakemake params as before the key existed."""
    from containmentbench.audit.judge_config import resolve_judge

    audit = data["study"].get("audit")
    if audit is None:
        return
    cfg = resolve_judge(audit.get("judge"), "study.audit.judge")
    if cfg is None:
        del data["study"]["audit"]
    else:
        audit["judge"] = cfg.to_dict()


def study_judge(data: dict[str, Any]) -> Any:
    """The study's judge settings (a JudgeConfig) from a resolved config, or None."""
    from containmentbench.audit.judge_config import resolve_judge

    return resolve_judge(((data.get("study") or {}).get("audit") or {}).get("judge"),
                         "study.audit.judge")


def is_sim_name(name: str) -> bool:
    """The simulated agent's names (``sim``, ``sim_always_follow``, ``sim_...``)."""
    return name == "sim" or name.startswith("sim_")


def config_hash(data: dict[str, Any]) -> str:
    return sha256_json(data)


def load_study(overrides: Sequence[str] = (), composed: Any = None) -> dict[str, Any]:
    """Compose + validate; also checks that the study has at least one shard. ``composed``:
    the DictConfig of ``compose(overrides)`` when the caller already has it."""
    data = validate(composed if composed is not None else compose(overrides))
    from containmentbench.pipeline.plan import shards

    if not shards(data):
        raise BenchError(f"study '{data['study']['name']}' has zero shards (no scenarios in "
                         f"the selected stages)", field="study.stages")
    mode = data["study"].get("tools_offered", "all")
    if mode != "all":  # every planned scenario's plans within what the mode offers
        from containmentbench.scenarios.manifest import load_suite
        from containmentbench.scenarios.toolsets import check_suite

        wanted = set(data["study"].get("scenarios") or [])
        check_suite((s for s in load_suite(data["study"]["suite"])
                     if s.stage in data["study"]["stages"] and (not wanted or s.id in wanted)),
                    mode, data["study"]["suite"])
    return data


def _in_run_dir(data: dict[str, Any], path: str | Path) -> bool:
    from containmentbench.pipeline.plan import run_dir

    return os.path.abspath(run_dir(data) / "config.yaml") == os.path.abspath(path)


def portable(data: dict[str, Any], path: str | Path | None) -> dict[str, Any]:
    """The config as a file at ``path`` records it. A config saved in its own run directory
    (``<results_dir>/<study>/<model>/config.yaml``) records no ``results_dir``: the folder
    it lives in says where the run is (``read_resolved``), so nothing about the machine
    enters the hashed file and a study folder copied to another ``results_dir`` keeps its
    bytes and verifies."""
    if path is None or "results_dir" not in data or not _in_run_dir(data, path):
        return data
    return {k: v for k, v in data.items() if k != "results_dir"}


def resolved_text(data: dict[str, Any], path: str | Path | None = None) -> str:
    """The text of ``config.yaml`` for a resolved config (what ``save_resolved`` writes to
    ``path``)."""
    import yaml

    data = portable(data, path)
    return "# resolved containmentbench config; sha256 of its canonical JSON:\n" \
        f"# {config_hash(data)}\n" + yaml.safe_dump(data, sort_keys=True)


def save_resolved(data: dict[str, Any], path: str | Path, force: bool = False) -> bool:
    """Write the resolved config (YAML) and its hash beside the outputs; only rewrites the
    file when its content changes (so file times stay meaningful). Returns True if written.
    In a frozen study the rewrite needs ``force`` (the pipeline's own run passes it: the
    change is journalled and the study is re-frozen)."""
    from containmentbench.integrity import writer

    path = Path(path)
    text = resolved_text(data, path)
    try:
        if path.read_text() == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    writer.write_text(path, text, kind="config", force=force)
    return True


def read_resolved(path: str | Path) -> dict[str, Any]:
    """A run's resolved ``config.yaml``: valid YAML holding a mapping of the config's
    sections, with names, paths, ranges, distinct lists and the analysis section checked (one
    line naming file and key)."""
    from containmentbench.integrity.inputs import read_yaml_mapping

    path = Path(path)
    data = read_yaml_mapping(path, "a resolved study config")
    # shape, names, paths and ranges, without OmegaConf (rollout jobs stay light) and without
    # the host-specific checks of `validate` (a model folder mounted only on GPU nodes must
    # not fail the analysis job on a CPU node)
    from containmentbench.config.bounds import check_bounds
    from containmentbench.config.keys import check_analysis, check_distinct
    from containmentbench.integrity.paths import check_dir, check_name

    try:
        for section in ("study", "model", "backend", "decoding", "defenses", "analysis",
                        "cluster", "runtime"):
            if not isinstance(data.get(section), dict):
                raise BenchError("missing or not a mapping", field=section)
        check_name(data["study"].get("name"), "study.name")
        if "results_dir" not in data:
            data["results_dir"] = results_dir_of(path, data)
        check_dir(data.get("results_dir"), "results_dir")
        check_bounds(data)
        check_distinct(data)
        check_analysis(data["analysis"])
    except BenchError as exc:
        raise BenchError(exc.detail, file=str(path), field=exc.field) from None
    return data


def results_dir_of(path: Path, data: dict[str, Any]) -> str:
    """``results_dir`` of a config that records none (``portable``): the folder above its
    study folder, when the file sits in its run directory."""
    from containmentbench.pipeline.plan import model_slug

    run = Path(os.path.abspath(path)).parent
    try:
        slug = model_slug(data)
    except (KeyError, TypeError, AttributeError):
        slug = None
    if run.name != slug or run.parent.name != data["study"]["name"]:
        raise BenchError("records no results_dir and is not in its run directory "
                         "(<results_dir>/<study>/<model>/config.yaml)", field="results_dir")
    return str(run.parent.parent)
