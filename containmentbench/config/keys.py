"""Known keys and distinct entries of the resolved study config.

Hydra's struct mode refuses an unknown key in a YAML file, but an override with ``+``
(``+study.foo=1``) adds one anyway, and the ``analysis`` section is an open dict in the schema
(its YAML is data: comparisons, sweeps), so ``+analysis.resample=10`` (for ``resamples``) used
to compose, hash into the study and change nothing. :func:`check_known` walks the resolved
config against the dataclass schema (``config/schema.py``) and :data:`ANALYSIS`, and refuses
any key neither names. Fields typed ``dict[str, Any]`` hold data and stay open:
``backend.options`` (checked by ``models/options.py``) and a defense's ``params`` (read by its
policy); ``defenses`` holds one ``DefenseConfig`` per defense name.

:func:`check_distinct` refuses a seed, defense or stage listed twice (each would run and count
twice, doubling its rows in every table).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from containmentbench.errors import BenchError, ValidationError
from containmentbench.integrity.shapes import STRS, B, I, List, N, S, check, unknown_hint

_PAIR = {"a": S, "b": S}
# the ``analysis`` section (config/analysis/*.yaml; what analysis/ reads of it)
ANALYSIS: dict[str, Any] = {
    "resamples": I, "confidence": N, "seed": I, "max_batch_elements": I,
    "primary_stage_order?": STRS,
    "comparisons": List({**_PAIR, "metric": S, "stage": S, "claim?": B}),
    "sweep": {"baseline": S, "metrics": List({"metric": S, "stage": S})},
    "zero_event": {"metrics": STRS, "stages": STRS},
    "divergence": List({**_PAIR, "stage": S}),
    "stage_contribution": {**_PAIR, "metric": S},
    "sensitivity": _PAIR,
    "attribution": List({**_PAIR, "metric": S, "stage": S}),
    "seed_variance": {"metrics": STRS},
    # validity gates of the headline (analysis/validity.py); optional, default 0.5
    "validity?": {"min_exposure?": N},
}

# lists whose entries must be distinct (dotted key -> what an entry is)
DISTINCT = {"study.seeds": "seed", "study.defenses": "defense", "study.stages": "stage",
            "study.scenarios": "scenario id", "study.adaptive.search_seeds": "seed",
            "study.adaptive.qualification_seeds": "seed", "study.adapter.suites": "suite",
            "study.differ_in": "serving key"}


def check_analysis(section: Any, prefix: str = "analysis", file: str | None = None) -> None:
    """The ``analysis`` section: every required key, each of its type, no unknown key."""
    try:
        check(section, ANALYSIS, strict=True, root=prefix, where=prefix)
    except ValidationError as exc:
        raise ValidationError(exc.detail, file=file, field=exc.field) from None


def check_distinct(data: dict[str, Any], file: str | None = None) -> None:
    for key, what in DISTINCT.items():
        node: Any = data
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, list):
            continue
        seen: dict[Any, int] = {}
        for i, v in enumerate(node):
            marker = repr(v)  # lists of plain values; repr keeps 1 and "1" apart
            if marker in seen:
                raise BenchError(f"{what} {v!r} is listed twice (entries {seen[marker]} and "
                                 f"{i}); each would run and be counted twice", file=file,
                                 field=f"{key}[{i}]")
            seen[marker] = i


def _dataclass_of(tp: Any) -> Any:
    return tp if dataclasses.is_dataclass(tp) else None


def _walk(node: Any, cls: Any, where: str) -> None:
    hints = typing.get_type_hints(cls)
    for key, value in node.items():
        path = f"{where}.{key}" if where else str(key)
        if key not in hints:
            raise BenchError(f"unknown key{unknown_hint(str(key), hints)} (not in the "
                             f"{cls.__name__} schema; a '+' override adds keys that nothing "
                             f"reads)", field=path)
        if not isinstance(value, dict):
            continue
        tp = hints[key]
        sub = _dataclass_of(tp)
        if sub is not None:
            _walk(value, sub, path)
        elif typing.get_origin(tp) is dict:
            args = typing.get_args(tp)
            inner = _dataclass_of(args[1]) if len(args) == 2 else None
            if inner is not None:  # defenses: {name: DefenseConfig}
                for name, entry in value.items():
                    if isinstance(entry, dict):
                        _walk(entry, inner, f"{path}.{name}")


def check_known(data: dict[str, Any]) -> None:
    """Every key of a resolved config is a schema field (or lies in an open section)."""
    from containmentbench.config.schema import RootConfig

    _walk({k: v for k, v in data.items() if k != "analysis"}, RootConfig, "")
    check_analysis(data.get("analysis"))
