"""Untrusted text made inert for each place it is written: a terminal, a Markdown table, LaTeX.

Scenario ids, completions, tool names and captions can carry text written by a model or by
an attacker. Each output syntax is escaped here, in one place, and every writer calls these
functions (``show``'s timeline, ``analysis.writers``, ``cim report``, ``reparse``):

* :func:`visible` spells out every character a terminal would act on or hide -- C0 controls
  but newline and tab, DEL, C1 controls, and Unicode format and separator characters (bidi
  overrides, zero-width characters, tag characters) -- as Python-style escapes (``\\x1b``,
  ``\\u202e``). ESC-based sequences (OSC 52 clipboard writes, CSI cursor moves, OSC 8
  hyperlinks) are then plain text.
* :func:`md_cell` / :func:`md_text`: a Markdown table cell or a line of Markdown: HTML
  (``< > &``), the cell separator ``|``, link brackets and newlines.
* :func:`latex`: LaTeX's special characters, the backslash included.

The HTML report escapes with ``html.escape`` (report/html.py) and carries a CSP.
"""

from __future__ import annotations

import re

# Every code point of Unicode categories Cc, Cf, Zl and Zp (Python 3.11's Unicode 14) except
# tab and newline; tests/test_escape.py checks the ranges against unicodedata.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2"
    "\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f]")


def _spell(m: re.Match[str]) -> str:
    cp = ord(m.group())
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def visible(text: str) -> str:
    """``text`` with every control, format and line-separator character (newline and tab
    aside) written as its escape, so a terminal shows it instead of obeying it."""
    return _INVISIBLE.sub(_spell, text)


_MD = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "[": "\\[",
                     "]": "\\]", "\n": "<br>"})


def md_cell(text: str) -> str:
    """One Markdown table cell: no HTML (``< > &`` as entities), no cell break (``\\|``), no
    link or image (``\\[``), a newline as ``<br>``; controls spelled out."""
    return visible(text.replace("\r\n", "\n")).translate(_MD)


def md_text(text: str) -> str:
    """A line of Markdown (a caption): as :func:`md_cell`, with newlines as spaces."""
    return md_cell(text).replace("<br>", " ")


# One pass, so the braces written for one character are never escaped again. ``[``/``]``
# are braced: after a row's ``\\`` a cell starting with ``[`` would be read as its argument.
_TEX = str.maketrans({"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$",
                      "&": r"\&", "#": r"\#", "^": r"\^{}", "_": r"\_", "%": r"\%",
                      "~": r"\textasciitilde{}", "<": r"\textless{}", ">": r"\textgreater{}",
                      "|": r"\textbar{}", "[": "{[}", "]": "{]}", "\n": " ", "\t": " "})


def latex(text: str) -> str:
    """Text for a LaTeX document (a table cell or caption): every special character escaped,
    newlines as spaces (a blank line would end the cell's paragraph), controls spelled out."""
    return visible(text.replace("\r\n", "\n")).translate(_TEX)
