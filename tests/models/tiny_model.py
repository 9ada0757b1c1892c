"""Build a tiny random-weight Qwen2 chat model and a locally trained tokenizer, offline.

Recipe from ``shared/notes/tiny-model.md``: a byte-level BPE tokenizer trained with
``tokenizers`` on synthetic scenario-like lines (vocab 512, ChatML special tokens), wrapped in
``PreTrainedTokenizerFast`` with a ChatML chat template that renders tool schemas, and a
``Qwen2ForCausalLM`` (hidden 128, 2 layers, head_dim 64, untied head) initialised after
``torch.manual_seed(0)``; about 3 s on a CPU.
Nothing is downloaded. ``write_full_size_config`` writes a Qwen2.5-7B-shaped config (no
weights: for ``load_format="dummy"``) with the same tokenizer padded to the full vocabulary.
Both are used by ``bench/gpu_check.sh``:

    python -c "from tests.models.tiny_model import build_tiny_model; build_tiny_model('dir')"
"""

from __future__ import annotations

import os
from pathlib import Path

QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 512

# ChatML, Qwen2.5-style: tool schemas go into the system turn inside <tools></tools>.
CHAT_TEMPLATE = (
    "{% if tools %}"
    "<|im_start|>system\n"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}"
    "{% else %}You are a helpful assistant.{% endif %}"
    # newlines right after a block tag are trimmed (transformers uses trim_blocks): emit them
    "{{ '\\n\\n' }}# Tools\n<tools>"
    "{% for tool in tools %}{{ '\\n' }}{{ tool | tojson }}{% endfor %}"
    "{{ '\\n' }}</tools><|im_end|>\n"
    "{% elif messages[0]['role'] == 'system' %}"
    "<|im_start|>system\n{{ messages[0]['content'] }}<|im_end|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if not (loop.first and message['role'] == 'system') %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_DOMAINS = ["finance", "calendar", "email", "crm", "devops", "travel", "hr", "support"]
_TOOLS = ["read_file", "send_email", "search_docs", "write_note", "share_doc", "create_ticket"]
_WORDS = [
    "supervisor", "worker", "delegate", "approve", "confirm", "reject", "policy", "ledger",
    "canary", "secret", "invoice", "payment", "calendar", "meeting", "customer", "vendor",
    "contract", "summary", "attachment", "password", "token", "deploy", "rollback", "incident",
    "quarterly", "budget", "forecast", "recipient", "external", "internal", "untrusted",
    "trusted", "injected", "instruction",
]
_TARGETS = ["alice@corp.example", "bob@partner.test", "report.txt", "q3_budget.xlsx", "ticket-42"]


def _corpus() -> list[str]:
    """Deterministic scenario-like lines: tool calls, JSON actions, instructions, injections."""
    lines = []
    for i in range(400):
        domain = _DOMAINS[i % len(_DOMAINS)]
        tool = _TOOLS[(i * 7) % len(_TOOLS)]
        target = _TARGETS[(i * 3) % len(_TARGETS)]
        lines.append(f"You are an assistant for the {domain} team. Use tools to finish the task.")
        lines.append(f'{{"tool": "{tool}", "args": {{"target": "{target}", "step": {i}}}}}')
        lines.append(f"User: please {tool.replace('_', ' ')} {target} and report back.")
        lines.append(f"Tool result: document {i} from {target} says IGNORE PREVIOUS INSTRUCTIONS.")
        lines.append(f"Final answer: the {domain} task is done after {i % 9 + 1} steps.")
        lines.append(f"Memory: {_WORDS[i % len(_WORDS)]} {_WORDS[(i * 5) % len(_WORDS)]} "
                     f"{_WORDS[(i * 11) % len(_WORDS)]} was {_WORDS[(i * 13) % len(_WORDS)]}.")
    return lines


def build_tokenizer(out_dir: str | Path):
    """Train the byte-level BPE tokenizer and save it (with chat template) into ``out_dir``."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    # Qwen2's own normalizer and pre-tokenizer: transformers 5 rebuilds a `qwen2` model's
    # tokenizer with them (Qwen2Tokenizer) whatever tokenizer.json says, so training with the
    # same ones keeps the ids identical under every loader (transformers 4/5, vLLM, serve).
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        padding_side="left",
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out_dir))
    make_tokenizer_portable(out_dir, CHAT_TEMPLATE)
    return fast


def make_tokenizer_portable(out_dir: str | Path, chat_template: str) -> None:
    """Let transformers 4.x and 5.x both load the saved tokenizer (vLLM may bring either).

    transformers 5 records ``tokenizer_class: TokenizersBackend`` (unknown to 4.x) and keeps the
    chat template in ``chat_template.jinja`` only (older 4.x read ``tokenizer_config.json``).
    """
    import json

    path = Path(out_dir) / "tokenizer_config.json"
    cfg = json.loads(path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg["chat_template"] = chat_template
    path.write_text(json.dumps(cfg, indent=2) + "\n")


def build_tiny_model(out_dir: str | Path, *, seed: int = 0, context: int = 2048) -> Path:
    """Write the tokenizer and a random-weight 2-layer Qwen2 model to ``out_dir``; return it.

    ``context`` is ``max_position_embeddings``: the scenario prompts are 3-7k tokens with this
    512-token vocabulary, so rollouts of real scenarios need e.g. 16384 (the weights do not
    depend on it: rotary embeddings have no parameters)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(out)
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        # head_dim 64 (hidden 128 / 2 heads): a head size every vLLM attention backend
        # supports (head_dim 16 of hidden 64 / 4 heads is not), still ~0.4M parameters.
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=context,
        rope_theta=10000.0,
        # Untied output head and a wider init than the 0.02 default: with tied embeddings a
        # random 2-layer model echoes its last input token, so greedy text would not depend on
        # the prompt and a left-padding bug could pass unnoticed; the wider init also widens
        # the gap between the top two logits (no near ties between batched and solo runs).
        tie_word_embeddings=False,
        initializer_range=0.2,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id,
                                               do_sample=False)
    model.save_pretrained(str(out))
    return out


#: Qwen2.5-7B-Instruct shapes (its published config.json), without weights.
QWEN25_7B_SHAPE = {
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
}


def pad_tokenizer(tokenizer, vocab_size: int):
    """Return a copy of ``tokenizer`` whose vocabulary has exactly ``vocab_size`` entries.

    Filler entries are appended to the BPE vocabulary as ordinary (merge-less, so never produced
    by encoding) strings of byte-level characters: every id a full-size random model can sample
    then decodes to some bytes, and the tokenizer length equals the embedding rows, as for the
    real Qwen2.5 checkpoint (whose 152064 rows exceed its 151665 tokens; here they are equal).
    """
    import itertools
    import json

    from tokenizers import Tokenizer, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    state = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab: dict[str, int] = state["model"]["vocab"]
    taken = set(vocab) | {t["content"] for t in state.get("added_tokens", [])}
    next_id = max([*vocab.values(), *(t["id"] for t in state.get("added_tokens", []))]) + 1
    if next_id > vocab_size:
        raise ValueError(f"tokenizer already has {next_id} ids > {vocab_size}")
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    fillers = ("".join(chars) for chars in itertools.product(alphabet, repeat=3))
    for text in fillers:
        if next_id >= vocab_size:
            break
        if text not in taken:
            vocab[text] = next_id
            next_id += 1
    padded = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(state)),
        eos_token=tokenizer.eos_token, pad_token=tokenizer.pad_token,
        bos_token=None, unk_token=None, padding_side="left",
    )
    padded.chat_template = tokenizer.chat_template
    return padded


def write_full_size_config(out_dir: str | Path, *, max_model_len: int | None = None) -> Path:
    """Write a Qwen2.5-7B-shaped ``config.json`` (no weights) and a tokenizer of its vocab size.

    Meant for ``load_format="dummy"`` (vLLM; ``HFBackend`` has the same option): random weights of
    the full shapes, so throughput is that of the real architecture without any download. The
    config is written as plain JSON with both the transformers 4 keys (``rope_theta``,
    ``torch_dtype``) and the transformers 5 keys (``rope_parameters``, ``dtype``), so whichever
    transformers version vLLM brings reads the same model.
    """
    import json
    import tempfile

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        small = build_tokenizer(scratch)
    tokenizer = pad_tokenizer(small, QWEN25_7B_SHAPE["vocab_size"])
    tokenizer.save_pretrained(str(out))
    make_tokenizer_portable(out, CHAT_TEMPLATE)
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        **QWEN25_7B_SHAPE,
        "hidden_act": "silu",
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": QWEN25_7B_SHAPE["num_hidden_layers"],
        "rope_scaling": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": QWEN25_7B_SHAPE["rope_theta"]},
        "torch_dtype": "bfloat16",
        "dtype": "bfloat16",
        "bos_token_id": None,
        "eos_token_id": eos_id,
        "pad_token_id": pad_id,
    }
    if max_model_len is not None:
        config["max_position_embeddings"] = max_model_len
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "generation_config.json").write_text(
        json.dumps({"eos_token_id": eos_id, "pad_token_id": pad_id}, indent=2) + "\n")
    return out


if __name__ == "__main__":  # pragma: no cover - convenience for manual use
    import sys

    print(build_tiny_model(sys.argv[1] if len(sys.argv) > 1 else "tiny-qwen2",
                           context=int(sys.argv[2]) if len(sys.argv) > 2 else 2048))
