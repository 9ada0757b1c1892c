"""One study, many models: compose one validated config per model entry (a *run*).

``study.models`` lists config entries: ``qwen2_5_7b_instruct`` (with the study's backend),
``qwen2_5_7b_instruct@vllm``, or ``{model: ..., backend: ...}``. Each run is composed with
Hydra exactly as a one-model study would be (``model=<entry> backend=<backend>`` appended to
the user's overrides) and validated up front, so a wrong entry fails before any job with a
one-line error naming ``study.models[i]``. Two entries with the same model slug would share a
run directory and are refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from containmentbench.errors import BenchError


def _entry(raw: Any, default_backend: str, i: int) -> tuple[str, str]:
    field = f"study.models[{i}]"
    if isinstance(raw, str):
        model, _, backend = raw.partition("@")
        backend = backend or default_backend
    elif isinstance(raw, dict):
        extra = sorted(set(raw) - {"model", "backend"})
        if extra:
            raise BenchError(f"unknown key '{extra[0]}' (known: model, backend)", field=field)
        model, backend = raw.get("model"), raw.get("backend") or default_backend
    else:
        raise BenchError("expected 'model', 'model@backend' or {model: ..., backend: ...}",
                         field=field)
    if not model or not isinstance(model, str) or not isinstance(backend, str):
        raise BenchError("names no model config entry", field=field)
    return model, backend


def model_entries(overrides: Sequence[str], cfg: Any = None) -> list[tuple[str, str]]:
    """The (model, backend) config entries a study lists; [] for a one-model study.
    ``cfg``: the composed config of ``overrides`` when the caller has it."""
    from omegaconf import OmegaConf

    from containmentbench.config.compose import compose

    if cfg is None:
        cfg = compose(overrides)
    raw = OmegaConf.to_container(cfg.study.models, resolve=True) or []
    if not raw:
        return []
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if key in ("model", "backend"):
            raise BenchError(f"study.models lists the models; drop the override '{o}'",
                             field=key)
    backend = OmegaConf.select(cfg, "hydra.runtime.choices.backend", default=None) \
        or str(cfg.backend.name)
    return [_entry(r, backend, i) for i, r in enumerate(raw)]


def load_runs(overrides: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One validated config per model of the study, in ``study.models`` order."""
    from containmentbench.config.compose import compose, load_study
    from containmentbench.pipeline.plan import model_label, model_slug

    cfg = compose(overrides)  # a one-model study is validated from this one composition
    entries = model_entries(overrides, cfg)
    if not entries:
        return [load_study(overrides, composed=cfg)]
    runs: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, (model, backend) in enumerate(entries):
        try:
            data = load_study([*overrides, f"model={model}", f"backend={backend}"])
        except BenchError as exc:
            # errors about the entry's model or backend name the entry; others keep their key
            f = exc.field or ""
            ours = not f or f in ("model", "backend") or f.startswith(("model.", "backend."))
            raise BenchError(f"model entry '{model}@{backend}': {exc.detail}",
                             file=exc.file, line=exc.line,
                             field=f"study.models[{i}]" if ours else f) from None
        slug = model_slug(data)
        if slug in seen:
            raise BenchError(f"model '{model_label(data)}' is listed twice (entries "
                             f"{seen[slug]} and {i}); its runs would be pooled",
                             field=f"study.models[{i}]")
        seen[slug] = i
        runs.append(data)
    from containmentbench.models.serving import check_alike, record

    # two models served differently (engine, version, parser, template, quantization,
    # decoding, tool mode) are compared only where the study says that is the point
    check_alike([(model_label(d), record(d)) for d in runs],
                list(runs[0]["study"].get("differ_in") or []),
                "study.differ_in=[{}]", "study.differ_in")
    return runs


def run_by_model(runs: Sequence[dict[str, Any]], slug: str) -> dict[str, Any]:
    from containmentbench.pipeline.plan import model_slug

    for data in runs:
        if model_slug(data) == slug:
            return data
    raise BenchError(f"no model '{slug}' in this study (models: "
                     f"{', '.join(model_slug(d) for d in runs)})", field="model")
