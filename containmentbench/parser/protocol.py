"""What the parser's steps hand each other: the base of the package's one-way layering.

The steps import downwards only (``core`` is the top)::

    protocol <- resolve <- shapes <- layers <- core
    (syntax and aliases: leaves every step may use)

``Candidate`` is one extracted candidate (a call or a final answer) before tool resolution:
``shapes`` and ``layers`` produce it and name each repair on it, ``resolve.finalize`` resolves
its tool and arguments, ``core`` assembles the result. ``ParserSettings`` is what a
``resolve.ParseContext`` reads of the config: ``core.ParserConfig`` has these fields, and
naming them here spares the steps an import of ``core``, which imports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class ParserSettings(Protocol):
    """The fields of ``core.ParserConfig`` that the steps read."""

    @property
    def repairs(self) -> frozenset[str]: ...

    @property
    def tool_aliases(self) -> Mapping[str, str]: ...

    @property
    def argument_aliases(self) -> Mapping[str, Mapping[str, str]]: ...

    @property
    def max_calls(self) -> int: ...


@dataclass(slots=True)
class Candidate:
    """An extracted candidate before tool resolution: a call or a final answer."""

    kind: str                      # "call" | "final"
    name: str = ""
    args: Any = None
    repairs: list[str] = field(default_factory=list)
    flat: bool = False
    error: str | None = None
    text: str | None = None
