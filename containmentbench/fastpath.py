"""Per-process start-up cost of the command-line jobs.

A study runs hundreds of short ``containmentbench`` processes (one per rollout job, plus
reparse, metrics, analysis), so a fixed cost per process is paid hundreds of times. The
largest was pandas: the project never uses it, but pyarrow's C++ converter imports it on the
first ``pa.array`` of a Python list (to recognise ``pd.NA`` and pandas timestamps), which
costs about 0.25 s CPU per process. The CLI blocks that import; the values the project
writes (Python ints, floats, strings, None, lists, numpy arrays) convert identically with or
without pandas, which the byte-identity tests of traces, metrics and tables check.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

# third-party model stacks (the hf and vllm backends) that may probe for or use pandas: once
# one is loaded the block steps aside (their start-up dwarfs pandas' anyway)
_MODEL_STACKS = ("torch", "transformers", "vllm", "datasets")


class _NoPandas:
    """A meta-path finder that makes ``import pandas`` fail (pyarrow then skips its pandas
    integration). Only installed by the CLI entry point for the duration of the command,
    never on library import."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: Any = None) -> None:
        if (name == "pandas" or name.startswith("pandas.")) \
                and not any(m in sys.modules for m in _MODEL_STACKS):
            raise ModuleNotFoundError("pandas is not imported by containmentbench jobs",
                                      name=name)
        return None


def block_pandas() -> bool:
    """Keep pandas out of this process unless something already imported it.
    Returns whether the block was installed."""
    if "pandas" in sys.modules or any(isinstance(f, _NoPandas) for f in sys.meta_path):
        return False
    sys.meta_path.insert(0, _NoPandas())
    return True


def unblock_pandas() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _NoPandas)]
