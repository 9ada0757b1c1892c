"""Which model judges, on which backend: the §4.3 judge's settings, from a file, a packaged
name or a study's ``study.audit.judge``.

The settings are ``backend``, ``model``, ``max_tokens``, backend ``options`` and an optional
``label``; decoding is fixed (greedy, seed 0: the paper is silent on the judge's decoding and
a rerun must give the same verdicts). Packaged judges live under ``audit/judges/`` and are
named by their file stem (``qwen2_5_coder_0_5b_cpu``). Every bad field is one line naming it
(exit 2), the same checks for a file, a name and an inline mapping.

A judge's identity (:func:`judge_identity`) is its resolved settings with a sha256 over the
canonical JSON of what decides its verdicts: the operational options of the backend (where
the server listens, time-outs, retries, concurrency: ``pipeline/plan.OPERATIONAL_OPTIONS``)
do not enter the hash, as they do not enter a shard key (paper 001 is silent on recording
the judge; this is what keeps audits by different judges apart). This module imports nothing heavy:
the study composition (``config/compose.py``) validates a study's judge with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.models.base import BackendConfig

JUDGES_DIR = Path(__file__).with_name("judges")
KEYS = ("backend", "model", "max_tokens", "options", "label")


@dataclass(frozen=True)
class JudgeConfig:
    """Which model judges, on which backend; decoding is fixed (greedy, seed 0)."""

    backend: str
    model: str
    max_tokens: int = 256
    options: dict[str, Any] = field(default_factory=dict)
    label: str | None = None   # a name for reports (the model's config name)

    def backend_config(self) -> BackendConfig:
        return BackendConfig(name=self.backend, model=self.model, max_tokens=self.max_tokens,
                             temperature=0.0, options=dict(self.options))

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "max_tokens": self.max_tokens,
                "options": dict(self.options), "label": self.label}


def packaged_judges() -> list[str]:
    return sorted(f.stem for f in JUDGES_DIR.glob("*.yaml"))


def config_from_mapping(d: Any, prefix: str = "judge", file: str | None = None
                        ) -> JudgeConfig:
    """A judge's settings from a mapping (a judge YAML's or a study's inline one); a bad
    field is one line naming ``<prefix>.<key>``."""
    from containmentbench.models.base import REGISTRY
    from containmentbench.models.options import check_options

    if not isinstance(d, dict):
        raise BenchError("judge config is not a mapping", file=file, field=prefix)
    for k in sorted(d, key=str):
        if k not in KEYS:
            raise BenchError(f"unknown key (known: {', '.join(sorted(KEYS))}; decoding is "
                             "fixed: greedy, seed 0)", file=file, field=f"{prefix}.{k}")
    for k in ("backend", "model"):
        if not isinstance(d.get(k), str) or not d[k]:
            raise BenchError("must be a non-empty string", file=file, field=f"{prefix}.{k}")
    if d["backend"] not in REGISTRY:
        raise BenchError(f"unknown backend '{d['backend']}' (known: "
                         f"{', '.join(sorted(REGISTRY))})", file=file,
                         field=f"{prefix}.backend")
    mt = d.get("max_tokens", 256)
    if isinstance(mt, bool) or not isinstance(mt, int) or not 8 <= mt <= 4096:
        raise BenchError("must be an integer from 8 to 4096", file=file,
                         field=f"{prefix}.max_tokens")
    opts = d.get("options") or {}
    if not isinstance(opts, dict):
        raise BenchError("must be a mapping", file=file, field=f"{prefix}.options")
    try:
        check_options(d["backend"], opts, prefix=f"{prefix}.options")
    except BenchError as exc:
        raise BenchError(exc.detail, file=file, field=exc.field) from None
    label = d.get("label")
    if label is not None and not isinstance(label, str):
        raise BenchError("must be a string", file=file, field=f"{prefix}.label")
    return JudgeConfig(d["backend"], d["model"], mt, dict(opts), label)


def load_judge_config(spec: str | Path, prefix: str = "judge") -> JudgeConfig:
    """A judge YAML by path, or by name under ``audit/judges/``; a bad field is one line
    naming it."""
    import yaml

    p = Path(spec)
    if not p.is_file():
        named = JUDGES_DIR / f"{spec}.yaml"
        if not named.is_file():
            raise BenchError(f"judge config '{spec}' is neither a file nor a packaged judge "
                             f"(known: {', '.join(packaged_judges())})", field=prefix)
        p = named
    try:
        d = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BenchError(f"judge config is not readable YAML ({exc.__class__.__name__})",
                         file=str(p), field=prefix) from None
    return config_from_mapping(d, prefix, str(p))


def resolve_judge(value: Any, prefix: str) -> JudgeConfig | None:
    """A study's judge (``study.audit.judge``): None, a packaged name, a judge YAML's path or
    an inline mapping."""
    if value is None:
        return None
    if isinstance(value, dict):
        return config_from_mapping(value, prefix)
    if isinstance(value, str) and value:
        return load_judge_config(value, prefix)
    raise BenchError(f"must be a packaged judge name ({', '.join(packaged_judges())}), a "
                     "judge YAML's path or a mapping {backend, model, max_tokens, options, "
                     "label}", field=prefix)


def judge_identity(cfg: JudgeConfig) -> dict[str, Any]:
    """The judge as the audit summary records it: its settings and ``sha256``, a hash of
    those that decide its verdicts (operational options dropped; module docstring)."""
    from containmentbench.canonical import sha256_json
    from containmentbench.pipeline.plan import OPERATIONAL_OPTIONS

    d = cfg.to_dict()
    decides = {**d, "options": {k: v for k, v in d["options"].items()
                                if k not in OPERATIONAL_OPTIONS}}
    return {**d, "sha256": sha256_json(decides)}
