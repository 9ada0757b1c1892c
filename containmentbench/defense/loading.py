"""A study's defense, ready to run: one configured defense or a stack ``a+b+c``, built from
the study's ``defenses`` configurations, with the code digest its rollouts record."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from containmentbench.defense.api import Defense, DefenseError
from containmentbench.defense.identity import code_digest
from containmentbench.defense.registry import build, split_stack


@dataclass(frozen=True, slots=True)
class Loaded:
    """A study's defense, ready to run: its name in the study (one configured defense or a
    stack ``a+b+c``), its layers in hook order and its code digest."""

    label: str
    layers: tuple[Defense, ...]
    code: str

    @property
    def policy_hash(self) -> str:
        """The configuration hash (one layer: its own policy hash, as before stacks)."""
        if len(self.layers) == 1:
            return self.layers[0].policy_hash
        from containmentbench.canonical import sha256_json

        return sha256_json([d.config.canonical() for d in self.layers])

    @property
    def method_version(self) -> str:
        return "+".join(d.method_version for d in self.layers)

    @property
    def prompt_guidance(self) -> str | None:
        parts = [d.prompt_guidance for d in self.layers if d.prompt_guidance]
        return "\n\n".join(parts) if parts else None

    @property
    def name(self) -> str:
        """The defense's name in the study (``label``)."""
        return self.label

    @property
    def params(self) -> dict[str, Any]:
        """The first layer's parameters (what a one-layer caller reads)."""
        return self.layers[0].params


def load_defense(label: str, defenses: Mapping[str, Any] | None = None) -> Loaded:
    """The layers of ``label`` (a configured defense or a stack ``a+b+c`` of them), built
    from the study's ``defenses`` configurations (default: the ``defenses`` config group),
    with their code digest."""
    if defenses is None:
        from containmentbench.config.loader import load_defenses

        defenses = load_defenses()
    out = []
    for part in split_stack(label):
        if part not in defenses:
            raise DefenseError(f"unknown defense '{part}' (configured: "
                               f"{', '.join(defenses)})", field="defense")
        out.append(build(part, defenses[part]))
    return Loaded(label, tuple(out), code_digest(label, defenses))
