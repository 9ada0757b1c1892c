"""Table writers: Parquet, CSV, Markdown and LaTeX (booktabs), each with its caption.

Every table is written the same way so that ``reproduce`` can compare bytes: floats are
rounded to a fixed number of decimals in the text formats, Parquet keeps full precision, and
no writer embeds a timestamp.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from containmentbench.escape import latex as tex
from containmentbench.escape import md_cell, md_text
from containmentbench.integrity import writer
from containmentbench.metrics.glossary import display

DECIMALS = 4


@dataclass(frozen=True)
class Table:
    name: str          # file stem, e.g. "table09_security_positive_control"
    caption: str
    frame: pl.DataFrame


def _cell(v: object) -> str:
    if v is None:
        return "N/A"
    if isinstance(v, float):
        if math.isnan(v):
            return "N/A"
        return f"{v:.{DECIMALS}f}"
    if isinstance(v, list):
        return "; ".join(map(str, v))
    return str(v)


def markdown(t: Table) -> str:
    """Headers in the glossary's display names (``metrics/glossary.py``: one name per
    quantity; Parquet and CSV keep the keys). Cells and caption escaped by ``containmentbench.escape`` (scenario ids, tool names and
    captions can be hostile text: no HTML, no cell break, no link)."""
    cols = t.frame.columns
    lines = [f"**{md_text(t.name)}.** {md_text(t.caption)}", "",
             "| " + " | ".join(md_cell(display(c)) for c in cols) + " |",
             "| " + " | ".join("---" for _ in cols) + " |"]
    for row in t.frame.iter_rows():
        lines.append("| " + " | ".join(md_cell(_cell(v)) for v in row) + " |")
    return "\n".join(lines) + "\n"


def latex(t: Table) -> str:
    """Every cell, header and the caption through ``containmentbench.escape.latex``."""
    cols = t.frame.columns
    align = "".join("r" if t.frame[c].dtype.is_numeric() else "l" for c in cols)
    out = [r"\begin{table}[t]", r"\centering", rf"\caption{{{tex(t.caption)}}}",
           rf"\label{{tab:{t.name}}}", rf"\begin{{tabular}}{{{align}}}", r"\toprule",
           " & ".join(tex(display(c)) for c in cols) + r" \\", r"\midrule"]
    for row in t.frame.iter_rows():
        out.append(" & ".join(tex(_cell(v)) for v in row) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(out) + "\n"


KIND = "tables"


FORMATS = ("parquet", "csv", "md", "tex")


def with_origin(frame: pl.DataFrame, origin: Mapping[str, object] | None) -> pl.DataFrame:
    """``frame`` with the leading columns ``study, model, backend, sim_agent`` of ``origin``
    (those it lacks), so a CSV shared alone still says whose numbers it holds and whether
    they are the simulated agent's."""
    if not origin:
        return frame
    lead = [pl.lit(v).alias(k) for k, v in origin.items() if k not in frame.columns]
    return frame.select(*lead, *frame.columns) if lead else frame


def read(path: Path, name: str | None = None) -> Table:
    """A table back from the Parquet file :func:`write` wrote: its frame and the caption
    kept in the file's metadata (``name``: the file's stem unless given)."""
    import pyarrow.parquet as pq

    arrow = pq.read_table(path)
    caption = (arrow.schema.metadata or {}).get(b"caption", b"").decode()
    return Table(name or Path(path).stem, caption, pl.from_arrow(arrow))


def write(t: Table, out_dir: Path, formats: tuple[str, ...] = FORMATS,
          origin: Mapping[str, object] | None = None) -> list[Path]:
    """Write the four formats, or ``formats`` of them (integrity.writer: kind ``tables``);
    returns the paths. ``origin`` (``Context.origin``: study, model, backend, sim_agent)
    leads every CSV row; Parquet keeps the table as built (``results.parquet`` carries
    the same four columns on every number)."""
    # one chunk per column: the Parquet page layout (and so the bytes) must not depend on how
    # polars happened to chunk the frame
    arrow = t.frame.rechunk().to_arrow().combine_chunks().replace_schema_metadata(
        {b"caption": t.caption.encode()})
    csv = with_origin(t.frame.with_columns(
        [pl.col(c).list.join("; ") for c in t.frame.columns
         if t.frame[c].dtype == pl.List(pl.String)]), origin).write_csv(
        float_precision=DECIMALS)
    paths = []
    writer.ensure_dir(Path(out_dir), KIND)
    render = {"parquet": lambda: writer.parquet_bytes(arrow, compression="zstd"),
              "csv": csv.encode, "md": lambda: markdown(t).encode(),
              "tex": lambda: latex(t).encode()}
    for suffix in formats:
        data = render[suffix]()
        p = Path(out_dir) / f"{t.name}.{suffix}"
        writer.write_bytes(p, data, kind=KIND)
        paths.append(p)
    return paths
