"""Errors that end a command with a one-line message and exit code 2.

Bad input (a malformed scenario file, an unknown tool in a plan, a wrong config key) must be
reported as one line naming the file, line and field, before anything is written.
"""

from __future__ import annotations


class BenchError(Exception):
    """A user-facing error: printed as one line, exit status 2."""

    exit_code = 2

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.detail = message
        super().__init__(self.render())

    def render(self) -> str:
        where = []
        if self.file:
            where.append(str(self.file) + (f":{self.line}" if self.line is not None else ""))
        if self.field:
            where.append(f"field '{self.field}'")
        prefix = ": ".join(where)
        text = f"{prefix}: {self.detail}" if prefix else self.detail
        return " ".join(text.split())  # always one line


class ValidationError(BenchError):
    """Input that does not satisfy a schema or contract."""


class SchemaError(BenchError):
    """A Parquet trace or table whose columns or types differ from the contract."""


class VerifyError(BenchError):
    """Hash verification failed (exit 1: the artifact, not the input, is wrong)."""

    exit_code = 1
