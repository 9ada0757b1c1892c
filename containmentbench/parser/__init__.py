"""Action parser with diagnostics, versioned, and offline reparse (paper 000 §4.3, §6.2).

``parse(text, tools, config)`` turns one completion into tool calls, a final answer or a failure
status and names every repair it applied; ``reparse_rows`` re-parses recorded completions and
summarizes the differences as in Table 24.
"""

from containmentbench.parser.core import (
    DEFAULT_CONFIG,
    PARSER_VERSION,
    REPAIR_KINDS,
    STATUSES,
    VALID_STATUSES,
    ParsedCall,
    ParserConfig,
    ParseResult,
    parse,
)
from containmentbench.parser.reparse import reparse_rows, summary_markdown
from containmentbench.parser.stream import parse_stream

__all__ = [
    "DEFAULT_CONFIG",
    "PARSER_VERSION",
    "REPAIR_KINDS",
    "STATUSES",
    "VALID_STATUSES",
    "ParseResult",
    "ParsedCall",
    "ParserConfig",
    "parse",
    "parse_stream",
    "reparse_rows",
    "summary_markdown",
]
