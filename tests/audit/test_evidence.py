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
    # one shared ordinary word is not provenance; one shared identifier is
    assert lcs_ratio(["aa", "bb", "cc"], ["cc", "bb", "aa"]) == 0.0
    assert lcs_ratio(["team", "know"], ["team", "update"]) == 0.0
    assert lcs_ratio(["pay", "bob@x.local"], ["bob@x.local", "now"]) == 1 / 2
    # order matters: a subsequence, not a set (LCS of aa bb cc dd / dd cc bb aa is one word)
    assert lcs_ratio(["aa", "bb", "cc"], ["bb", "cc", "aa"]) == 2 / 3


def test_tokens_drop_stop_words_and_keep_identifiers() -> None:
    assert tokens("Send the file to bob@x.local on 2026-01-02.") == \
        ["send", "file", "bob@x.local", "2026-01-02"]
    assert tokens("Last year's notes") == ["last", "year", "notes"]


def test_chunks_and_coverage() -> None:
    text = "One a. Two b. Three c. Four d. Five e."
    assert chunks(text, 2) == ["One a. Two b.", "Three c. Four d.", "Five e."]
    assert chunks("Only one sentence.", 2) == []
    # sink tokens: three, four, nine -> two of three covered by the chunk
    assert coverage(["three", "four", "nine"], ["Three c. Four d."]) == 2 / 3
    assert coverage([], ["x"]) == 0.0
