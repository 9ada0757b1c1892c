"""Who wrote a trace text: the benchmark, or the model (paper 000 Appendix L's audit needs to
know: it checks what the benchmark releases, while what a model writes is a measured outcome).

Model-written text reaches the traces two ways:

* in the events the model's completions produce (``MODEL_AUTHORED``: the completion itself,
  proposals, invalid tools and parse errors, messages, commits of its arguments, ...), and
* echoed by the runtime into an environment event (``runtime/episode.py``): an unknown tool's
  name in ``INVALID TOOL <name>: ...``, the parser's error in ``FORMAT ERROR: ...``, an
  argument in a tool's error (``ERROR read_email: unknown email '<id>'``), and anything the
  model committed to the world and later read back (a memory entry, a sent e-mail).

The second kind is recognised without trusting the text: an environment event's text keeps
only what is left after removing every string the model wrote *earlier in the same rollout*
(a tool name, an argument value, a parse error), raw or as JSON-escaped in a payload.
Content planted in the benchmark is read before the model can write it, so it stays. A
proposal the runtime made itself (``origin`` set, trace schema 2: the prefilled first read) is
benchmark text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

# Events whose text the model wrote (or that carry what it wrote). A domain there is an
# outcome of the rollout, not a property of the release: the sandbox delivers nothing, and a
# completion cut off at max_tokens can end mid-address ("...@office.loca").
MODEL_AUTHORED = frozenset({"model_call", "proposal", "invalid_tool", "parse_error",
                            "dropped_call", "decision", "confirm_request", "commit",
                            "rollback", "message", "memory_write", "final_answer"})


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)


def model_strings(row: dict[str, Any]) -> list[str]:
    """The strings the model wrote in one event row (``kind``, ``tool``, ``args``, ``text``,
    ``origin``); none for an environment event or a runtime-made proposal."""
    if row["kind"] not in MODEL_AUTHORED or row.get("origin"):
        return []
    out = [s for s in (row.get("tool"), row.get("text")) if s]
    if row.get("args"):
        try:
            out += list(_leaves(json.loads(row["args"])))
        except ValueError:
            out.append(row["args"])
    return [s for s in out if s]


class Echoes:
    """The strings each rollout's model has written so far; fed events in ``seq`` order (the
    order ``trace/io`` stores them in). A model event's strings are taken out of it (its
    arguments parsed) only when ``said`` asks for that rollout: the audit asks for the few
    texts with a hit, not for every event of a study."""

    def __init__(self) -> None:
        self._said: dict[str, dict[str, None]] = {}  # rollout -> strings, insertion-ordered
        self._pending: dict[str, list[dict[str, Any]]] = {}  # fed, not yet taken apart

    def said(self, rollout_id: str) -> tuple[str, ...]:
        pending = self._pending.pop(rollout_id, None)
        if pending:
            said = self._said.setdefault(rollout_id, {})
            for row in pending:
                for s in model_strings(row):
                    said[s] = None
        return tuple(self._said.get(rollout_id, ()))

    def feed(self, row: dict[str, Any]) -> None:
        if row["kind"] in MODEL_AUTHORED and not row.get("origin"):
            self._pending.setdefault(row["rollout_id"], []).append(row)


def benchmark_part(text: str, said: tuple[str, ...]) -> str:
    """``text`` without what the model wrote earlier (each string raw and JSON-escaped, the
    longest first, replaced by a space so that no new token forms across the gap)."""
    for s in sorted(said, key=len, reverse=True):
        for form in {s, json.dumps(s, ensure_ascii=False)[1:-1]}:
            if form in text:
                text = text.replace(form, " ")
    return text
