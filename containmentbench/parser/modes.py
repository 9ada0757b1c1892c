"""Parser modes a study can record with (``study.parser``, paper 000 §6.2, Appendix I).

* ``current``: the repaired parser (``DEFAULT_CONFIG``), recorded as ``cb-parser/<v>``;
* ``legacy``: the pre-repair parser (strict JSON, anything else a final answer; the "old
  parser interpretation" of Table 24), recorded as ``cb-parser/<v>+legacy``.

The mode is written into every rollout's ``parser_version``, so a legacy-parser study is
never mistaken for a current one, and ``reparse`` of its traces with the current parser
yields Table 24's old/new counts (old action-like final answers, recovered proposals).
"""

from __future__ import annotations

from containmentbench.parser.core import DEFAULT_CONFIG, PARSER_VERSION, ParserConfig

PARSER_MODES = ("current", "legacy")
_LEGACY = ParserConfig.legacy()


def parser_for(mode: str) -> ParserConfig:
    if mode == "current":
        return DEFAULT_CONFIG
    if mode == "legacy":
        return _LEGACY
    raise ValueError(f"unknown parser mode '{mode}' (known: {', '.join(PARSER_MODES)})")


def recorded_version(config: ParserConfig | None) -> str:
    """The ``parser_version`` a rollout records for the parser config it ran with."""
    h = config.config_hash() if config is not None else DEFAULT_CONFIG.config_hash()
    if h == DEFAULT_CONFIG.config_hash():
        return PARSER_VERSION
    if h == _LEGACY.config_hash():
        return f"{PARSER_VERSION}+legacy"
    return f"{PARSER_VERSION}+config-{config.config_hash()[:12]}"
