"""Untrusted text made inert (``containmentbench.escape``): for terminals, Markdown tables and
LaTeX, and through every table writer (``analysis.writers``, ``cim report``, ``reparse``)."""

from __future__ import annotations

import re
import unicodedata

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from containmentbench.analysis.writers import Table, latex, markdown, write
from containmentbench.escape import latex as tex
from containmentbench.escape import md_cell, md_text, visible

HOSTILE_IDS = [
    "\\input /etc/hostname\\relax",
    "<img src=x onerror=alert(1)>",
    "a|b",
    "line one\nline two",
    "[click](http://attacker.example.com)",
    "![pixel](http://attacker.example.com/p.png)",
    "$x^2$ & 100% #1 ~_{}",
    "\x1b]52;c;cHduZWQ=\x07",
    "\u202egnp.exe",
    "[2pt]",
]

# what a terminal would obey or hide: Cc, Cf, Zl, Zp, tab and newline aside
_HIDDEN = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c))
           in ("Cc", "Cf", "Zl", "Zp") and chr(c) not in "\t\n"]


def test_visible_spells_out_every_control_format_and_separator_character():
    text = "".join(_HIDDEN)
    out = visible(text)
    assert not set(out) & set(_HIDDEN)
    assert out.count("\\") == len(_HIDDEN)  # one escape each
    assert visible("\x1b[2J\x00\x9b\u202e\U000e0041") == "\\x1b[2J\\x00\\x9b\\u202e\\U000e0041"
    assert visible("tab\tnew\nline é ü 中") == "tab\tnew\nline é ü 中"  # printable kept


@settings(max_examples=300, deadline=None, database=None)
@given(st.text())
def test_visible_leaves_nothing_hidden_and_is_idempotent(text):
    out = visible(text)
    assert not set(out) & set(_HIDDEN)
    assert visible(out) == out


# ------------------------------------------------------------------ Markdown

_MD_TOKEN = re.compile(r"&amp;|&lt;|&gt;|\\\||\\\[|\\\]|<br>|[^&<>|\[\]\n]")
_MD_BACK = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "\\|": "|", "\\[": "[", "\\]": "]",
            "<br>": "\n"}


@settings(max_examples=500, deadline=None, database=None)
@given(st.text())
def test_md_cell_is_inert_and_lossless(text):
    out = md_cell(text)
    # only plain characters and our escapes: no tag, no cell break, no link, no line break
    tokens = _MD_TOKEN.findall(out)
    assert "".join(tokens) == out
    assert "".join(_MD_BACK.get(t, t) for t in tokens) == visible(text.replace("\r\n", "\n"))
    assert "\n" not in md_text(text) and "<br>" not in md_text(text)


# ------------------------------------------------------------------ LaTeX

_TEX_BACK = {r"\textbackslash{}": "\\", r"\{": "{", r"\}": "}", r"\$": "$", r"\&": "&",
             r"\#": "#", r"\^{}": "^", r"\_": "_", r"\%": "%", r"\textasciitilde{}": "~",
             r"\textless{}": "<", r"\textgreater{}": ">", r"\textbar{}": "|", "{[}": "[",
             "{]}": "]"}
_TEX_TOKEN = re.compile("|".join(re.escape(k) for k in _TEX_BACK) + r"|[^\\{}$&#^_%~<>|\[\]\n]")


@settings(max_examples=500, deadline=None, database=None)
@given(st.text())
def test_latex_is_a_sequence_of_plain_characters_and_escapes(text):
    out = tex(text)
    tokens = _TEX_TOKEN.findall(out)
    assert "".join(tokens) == out  # no command, brace or special character of the input
    expect = visible(text.replace("\r\n", "\n")).replace("\n", " ").replace("\t", " ")
    assert "".join(_TEX_BACK.get(t, t) for t in tokens) == expect


# ------------------------------------------------------------------ every table writer

def _hostile_table() -> Table:
    return Table("case_studies", "Caption with <b>tags</b> & a | pipe\nand \\relax",
                 pl.DataFrame({"scenario_id": HOSTILE_IDS, "n": list(range(len(HOSTILE_IDS)))}))


def test_markdown_table_rows_keep_their_shape():
    md = markdown(_hostile_table())
    lines = md.splitlines()
    assert len(lines) == 4 + len(HOSTILE_IDS)  # caption, blank, header, rule, one per row
    for line in lines[2:]:
        assert len(re.findall(r"(?<!\\)\|", line)) == 3  # two cells, nothing more
    assert "<img" not in md and "<b>" not in md and "](" not in md.replace("\\](", "")
    assert "&lt;img src=x onerror=alert(1)&gt;" in md
    assert "line one<br>line two" in md
    assert "\x1b" not in md and "\u202e" not in md and "\\x1b\\]52;c;" in md


def test_latex_table_has_no_command_from_the_data():
    out = latex(_hostile_table())
    assert "\\input" not in out and "\\relax" not in out
    assert "\\textbackslash{}input /etc/hostname\\textbackslash{}relax" in out
    body = out.split(r"\midrule")[1].split(r"\bottomrule")[0]
    # every backslash in the rows starts one of the escapes, or the row end
    rest = re.sub("|".join(re.escape(k) for k in _TEX_BACK if k.startswith("\\")), "",
                  body).replace(r" \\", "")
    assert "\\" not in rest
    assert "{[}2pt{]}" in out  # never read as the previous row's \\[2pt]
    assert r"\caption{Caption with \textless{}b\textgreater{}tags" in out


def test_written_tables_are_escaped(tmp_path):
    write(_hostile_table(), tmp_path)
    md = (tmp_path / "case_studies.md").read_text()
    tex_text = (tmp_path / "case_studies.tex").read_text()
    assert "<img" not in md and "\\input" not in tex_text


def test_cim_and_reparse_markdown_cells_are_escaped():
    from containmentbench.cim.report import _md
    from containmentbench.parser.reparse import summary_markdown

    md = _md(["Workflow", "x"], [["<img src=x>|wf", 1]])
    assert "<img" not in md and "&lt;img src=x&gt;\\|wf" in md
    summary = {k: 0 for k in ("input_model_actions", "valid_tool_proposals_recovered",
                              "old_action_like_final_answers", "new_action_like_final_answers",
                              "repaired_parses", "invalid_tool_actions", "n_changed")}
    summary.update(status_counts_new={"<b>x|y": 1}, parser_version="v", config_hash="0" * 12)
    md = summary_markdown(summary)
    assert "<b>" not in md and "parse_status=&lt;b&gt;x\\|y" in md
