"""A frozen wall clock for AgentDojo's tools, so reruns are byte-identical.

Some native tools stamp the environment with ``datetime.datetime.now()`` (a sent email's
timestamp, a file's ``last_modified``). Those values reach our environment-diff events, so
under a running clock two runs of the same task differ. While :func:`frozen_clock` is active,
those tool modules see a ``datetime`` whose ``now()`` is a fixed instant (design
"Determinism": logical clocks in traces, wall time only in ``timings``). Native and adapter
runs both execute under it, so their labels compare like with like.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import types
from collections.abc import Iterator
from contextlib import contextmanager

# the suites' own "today" (workspace's calendar current_day is 2024-05-15)
FROZEN_NOW = _dt.datetime(2024, 5, 15, 10, 0, 0)

# modules of agentdojo==0.1.35 that call datetime.datetime.now() inside a tool
_MODULES = ("agentdojo.default_suites.v1.tools.email_client",
            "agentdojo.default_suites.v1.tools.cloud_drive_client")


class _FrozenDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz: _dt.tzinfo | None = None) -> _dt.datetime:  # type: ignore[override]
        return FROZEN_NOW if tz is None else FROZEN_NOW.replace(tzinfo=tz)

    @classmethod
    def today(cls) -> _dt.datetime:  # type: ignore[override]
        return FROZEN_NOW


def _shim() -> types.ModuleType:
    m = types.ModuleType("datetime")
    m.__dict__.update(_dt.__dict__)
    m.datetime = _FrozenDatetime  # type: ignore[attr-defined]
    return m


@contextmanager
def frozen_clock() -> Iterator[None]:
    saved = []
    shim = _shim()
    for name in _MODULES:
        mod = importlib.import_module(name)
        saved.append((mod, mod.datetime))
        mod.datetime = shim
    try:
        yield
    finally:
        for mod, orig in saved:
            mod.datetime = orig
