"""Our parser against vLLM's own tool parsers (hermes, mistral, llama3_json, pythonic) on a
generated corpus: the same calls (names and arguments) on every completion of each format.
Needs vllm (``make test-vllm`` runs it in ``.venv-vllm``); no engine is started."""

from __future__ import annotations

import importlib.util
import json
import random

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="needs vllm (make test-vllm)")

# tools that are not sandbox tools: no schema coercion on our side, raw arguments on both
NAMES = ["get_weather", "lookup_order", "create_invoice", "search_flights", "notify_team"]
WORDS = ["Paris", "order-17", "Q3 report", "it's \"final\"", "a, b", "x=1", "{braces}", "é"]


def _call(rng: random.Random) -> dict:
    args = {}
    for k in rng.sample(["city", "order_id", "amount", "note", "count", "urgent"],
                        rng.randint(1, 3)):
        if k in ("amount", "count"):
            args[k] = rng.randint(0, 999)
        elif k == "urgent":
            args[k] = rng.random() < 0.5
        else:
            args[k] = rng.choice(WORDS)
    return {"name": rng.choice(NAMES), "arguments": args}


def _render(fmt: str, calls: list[dict]) -> str:
    if fmt == "hermes":
        return "\n".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls)
    if fmt == "llama3_json":
        return "; ".join(json.dumps({"name": c["name"], "parameters": c["arguments"]})
                         for c in calls)
    if fmt == "mistral":
        return "".join(f"[TOOL_CALLS]{c['name']}{json.dumps(c['arguments'])}" for c in calls)
    if fmt == "pythonic":
        return "[" + ", ".join(
            c["name"] + "(" + ", ".join(f"{k}={v!r}" for k, v in c["arguments"].items()) + ")"
            for c in calls) + "]"
    raise ValueError(fmt)


def _corpus(fmt: str, n: int = 60) -> list[tuple[str, list[dict]]]:
    rng = random.Random(f"corpus:{fmt}")
    out = []
    for _ in range(n):
        calls = [_call(rng) for _ in range(1 if fmt == "llama3_json" else rng.randint(1, 3))]
        out.append((_render(fmt, calls), calls))
    return out


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from tests.models.tiny_model import build_tokenizer

    tok = build_tokenizer(tmp_path_factory.mktemp("tok"))
    tok.add_special_tokens({"additional_special_tokens": [
        "<tool_call>", "</tool_call>", "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>",
        "<|python_start|>", "<|python_end|>", "<|eom_id|>"]})
    return tok


@pytest.mark.parametrize("fmt", ["hermes", "llama3_json", "mistral", "pythonic"])
def test_agreement_with_vllm_tool_parsers(fmt, tokenizer):
    from containmentbench.canonical import canonical_json
    from containmentbench.models.vllm_tools import agreement, calls_of_ours, make_native_parser

    theirs = make_native_parser(fmt, tokenizer)
    corpus = _corpus(fmt)
    pairs = []
    for text, calls in corpus:
        expected = canonical_json(calls)
        ours = calls_of_ours(text)
        native = theirs(text, None)
        assert ours == expected, (fmt, text, ours)  # ours is right on every completion
        pairs.append((ours, native))
    result = agreement(pairs)
    print(f"{fmt}: vLLM agrees with ours on {result['agree']}/{result['n']}")
    assert result["share"] == 1.0, result["examples"]


def test_no_call_text_is_no_call_for_both(tokenizer):
    from containmentbench.models.vllm_tools import calls_of_ours, make_native_parser

    for fmt in ("hermes", "pythonic"):
        assert make_native_parser(fmt, tokenizer)("The task is done.", None) == "[]"
    assert calls_of_ours("The task is done.") == "[]"
