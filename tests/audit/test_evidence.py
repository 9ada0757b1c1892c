from __future__ import annotations

from containmentbench.audit.evidence import (
    canaries_in,
    canary_for,
    chunks,
    coverage,
    lcs_ratio,
    tokens,
)


def test_canary_is_deterministic_and_per_source() -> None:
    a, b = canary_for("src-1"), canary_for("src-2")
    assert a == canary_for("src-1") and a != b
    assert canaries_in(f"page text {a} more") == {a}
    assert canaries_in("NT-zzzz-0000 is not one") == set()


def test_lcs_ratio_independent_values() -> None:
    # LCS of (a b c d) and (b d x) is (b d): 2 / min(4, 3)
    assert lcs_ratio(["a", "b", "c", "d"], ["b", "d", "x"]) == 2 / 3
    assert lcs_ratio(["a"], []) == 0.0
    # order matters: a subsequence, not a set
    assert lcs_ratio(["a", "b", "c"], ["c", "b", "a"]) == 1 / 3


def test_tokens_drop_stop_words_and_keep_identifiers() -> None:
    assert tokens("Send the file to bob@x.local on 2026-01-02.") == \
        ["send", "file", "bob@x.local", "2026-01-02"]


def test_chunks_and_coverage() -> None:
    text = "One a. Two b. Three c. Four d. Five e."
    assert chunks(text, 2) == ["One a. Two b.", "Three c. Four d.", "Five e."]
    assert chunks("Only one sentence.", 2) == []
    # sink tokens: three, four, nine -> two of three covered by the chunk
    assert coverage(["three", "four", "nine"], ["Three c. Four d."]) == 2 / 3
    assert coverage([], ["x"]) == 0.0
