"""Every regular expression of the package that reads benchmark or model text, applied the way
the code applies it, with the near misses that stress it (issue 22, "Hostile text").

Shared by ``tests/test_regex_worst_case.py`` (each use on adversarial 1 MB texts under a time
bound, and a check that no pattern is left out) and ``bench/regex_worst_case.py`` (the worst
case per use). A new pattern in a module that reads such text must be added here; the test
finds the ones that are not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from containmentbench import escape
from containmentbench.attacks import follow, funnel, mutation
from containmentbench.audit import canary, carry, evidence, judge, specificity, suite_check
from containmentbench.cim import otlp_shape
from containmentbench.integrity import paths, reading
from containmentbench.models import redact, serving
from containmentbench.parser import aliases, layers, resolve, syntax
from containmentbench.report import build, cases, integrity, serve
from containmentbench.report import html as report_html
from containmentbench.runtime import provenance
from containmentbench.sandbox import values
from containmentbench.sandbox.tools import TOOLS
from containmentbench.scenarios import builder, literal
from containmentbench.scenarios import model as scenario_model


def scan(p: re.Pattern[str]) -> Callable[[str], int]:
    """Every match from every start: what ``search``, ``findall``, ``finditer``, ``sub`` and
    ``split`` cost at most."""
    return lambda t: sum(1 for _ in p.finditer(t))


def tokenize(p: re.Pattern[str]) -> Callable[[str], int]:
    """``match`` at the end of the previous match until one fails (a tokenizer loop)."""
    def run(t: str) -> int:
        pos = n = 0
        while (m := p.match(t, pos)) is not None and m.end() > pos:
            pos, n = m.end(), n + 1
        return n
    return run


def match_after(p: re.Pattern[str], q: re.Pattern[str]) -> Callable[[str], int]:
    """``p.match`` at the end of each match of ``q``."""
    return lambda t: sum(1 for m in q.finditer(t) if p.match(t, m.end()))


def call(f: Callable[[str], object]) -> Callable[[str], int]:
    return lambda t: len(f(t) or "")


@dataclass(frozen=True)
class Use:
    name: str                        # module.attribute (a pattern or a function)
    pattern: re.Pattern[str] | None  # the compiled pattern, None for a function
    run: Callable[[str], int]        # applies it as the code does
    atoms: tuple[str, ...] = ()      # near misses of this pattern


def _s(mod: object, attr: str, *atoms: str) -> Use:
    p = getattr(mod, attr)
    return Use(f"{mod.__name__}.{attr}", p, scan(p), atoms)  # type: ignore[attr-defined]


NAMES = layers._name_pattern(frozenset(TOOLS))
USES: tuple[Use, ...] = (
    # parser: completions of any model (tests/parser pins what it accepts)
    _s(layers, "_PY_LIST", "[", "[ a", "[a.b", "[a.b ("),
    _s(layers, "_FUNC_TAG", "<function=", "<function=a", "<function=a."),
    _s(layers, "_LANG", "json", "json ", "a-b+"),
    _s(layers, "_REACT", "Action:", "\nAction: ", "Action: a", "Action: `a"),
    Use("containmentbench.parser.layers._REACT_INPUT", layers._REACT_INPUT,
        match_after(layers._REACT_INPUT, layers._REACT),
        ("\nAction: a\n", "Action Input", " \n", "Action _ Input :")),
    _s(layers, "_REACT_FINAL", "Final", "Final Answer", "\nFinal _"),
    _s(layers, "_REACT_LINE", "\nAction", "Action Input", "Action _"),
    _s(layers, "_THOUGHT", "\nThought", "Thought :"),
    _s(layers, "_MISTRAL_V11", "[TOOL_CALLS]", "[TOOL_CALLS]a", "[TOOL_CALLS]a [ARGS]"),
    _s(layers, "_MARKERS", "Action", "Action Input", "```", "``` json", '"tool', '"tool"',
       "{tool", "{ action", "<tool_call", "<|python_"),
    Use("containmentbench.parser.layers._name_pattern(TOOLS)", NAMES, scan(NAMES),
        ("send_email", "send_email ", "send_email:", "read_email\n", "memory_list (")),
    _s(aliases, "_CAMEL", "aB", "a-", "A"),
    _s(aliases, "_SEP", " - ", "/"),
    _s(resolve, "_IDENT", "a", "a1_"),
    Use("containmentbench.parser.syntax._TOK", syntax._TOK, tokenize(syntax._TOK),
        ('"', "'", '"\\', "\\", "-1.", "1e", "-", "a,", ' "a', "'a\\'", "$a")),
    _s(syntax, "_SCAN", '"', "\\", "{"),
    # runtime: field-level taint over tool arguments and observations
    _s(provenance, "_WORD", "a@", "a.b", "%+-"),
    _s(provenance, "_IDENTISH", "cb-canar", "cb-"),
    # report: the integrity audit and the report's own pages
    _s(integrity, "CANARY", "CB-CANARY-", "CB-CANARY-0123456789", "CB-CANARY-012345678"),
    _s(integrity, "CANARY_LIKE", "password", "password ", "api_key", "secret-key :", "canary="),
    Use("containmentbench.report.integrity.email_domains", integrity.EMAIL_AT,
        call(integrity.email_domains), ("a", "a@", "a@b", "a@b.", "@b.c", "a.", "-", "a@b-")),
    _s(integrity, "URL", "http://", "https://a", "ftp:/", "http://a"),
    *(Use(f"containmentbench.report.integrity.FORBIDDEN[{k!r}]", p, scan(p),
          ("A", "A" * 61, "AAAA+/", "=", "<script", "javascript", "<!-", "\u200b"))
      for k, p in integrity.FORBIDDEN.items()),
    _s(build, "_ROLLOUT_LINK", "rollouts/r-", "rollouts/r-0a", "rollouts/"),
    # report --serve: the path of a request to 127.0.0.1 (any local client's text)
    _s(serve, "_PAGE", "rollouts/r-", "rollouts/r-0a", "rollouts/r-0a.htm", "rollouts/"),
    _s(cases, "_PATH", "/home", "/home/a", "/home/", "C:\\", "C:\\a\\", "C:\\a", "a/home/"),
    # audit: evidence tiers over source and sink text; the judge model's reply
    _s(evidence, "CANARY_RE", "NT-", "NT-0a0a-", "NT-0a0a-0a0"),
    _s(evidence, "_TOKEN", "a.", "a@", "a%+-", "."),
    _s(evidence, "_SENT", ". ", "!", " "),
    _s(evidence, "_WS", " ", "\t\n", " a "),
    _s(evidence, "_CANARY_SUFFIX", " ", "[ref NT-", "[ref NT-0a0a-", " [ref NT-0a0a-0a0a"),
    _s(evidence, "_CLAUSE", ", ", " then ", " then", "; "),
    _s(suite_check, "_NUMBER", "0", "0,", "0.-", "0-0"),
    _s(serving, "_QUANT", "Q4", "IQ4_", "Q4_K_", "_0", "BF1"),
    _s(builder, "_PLAN_FIELD", "plans.", "plans.a[", "plans.a[0", "[0]"),
    _s(evidence, "_WORD", "a.", "a@", "a,", "a'-", "a%+,/:'-", "."),
    _s(carry, "_SENT", ". ", "!", " "),
    # audit: Tier 2's specificity (one pass over words, anchored checks per word)
    _s(specificity, "_WORD", "a@", "a.", "$1,", "a:/", "a'-"),
    _s(specificity, "_DATE", "2026-", "2026-1-", "1/1/", "1.1."),
    _s(specificity, "_NUMBER", "$1", "1,", "1.0.", "1h", "1hr", "1min"),
    _s(specificity, "_IBAN_HEAD", "de8", "de89", "de89a"),
    _s(specificity, "_LABEL", "a-", "-"),
    _s(specificity, "_PARTS", "-", "."),
    Use("containmentbench.audit.specificity.tokens", None,
        call(lambda t: specificity.tokens(t)),
        ("de89 ", "1234 ", "+1 ", "a@b.com ", "http://a.io/", "a.b.com ", "1, ")),
    _s(canary, "_STRIP", " [ref ", " [ref NT-", " [ref NT-0a0a-0a0a", "NT-0a0a-"),
    Use("containmentbench.audit.judge.parse", None, call(judge.parse),
        ("{", '{"a', "}", "{}", "```", "```json\n{")),
    # models: a provider's error body, redacted before it is written anywhere
    _s(redact, "_SCHEME", "Bearer", "Bearer ", "Basic ", "Basic AAAAAAA", "bearer\t"),
    _s(redact, "_NAMED", "authorization", "api_key", "api-key=", 'password"', "passwd : ",
       "x-api-key:", "\\\"api_key\\\": \\\""),
    _s(redact, "_USERINFO", "://", "://a", "://a:b"),
    # attacks: exact-goal normalisation and a served model's rewrites
    _s(funnel, "_SPACE", " ", "\t\n"),
    _s(mutation, "_SPACE", " ", "\n"),
    Use("containmentbench.attacks.mutation.template_body", None, call(mutation.template_body),
        ("<template>", "</template", "<template", "<template></template>")),
    # show and the table writers: what they escape
    _s(escape, "_INVISIBLE", "\x1b", "\u202e", "\x00"),
    _s(paths, "NAME", "a", "a.", "a+"),
    # scenario records: id rules (scenario files are benchmark text)
    _s(scenario_model, "SCENARIO_ID", "a", "a~", "a.b", "a" * 127),
    # the forms a value can take (sandbox/values.py): recipient values and texts of any model
    Use("containmentbench.sandbox.values._NAMED", values._NAMED,
        lambda t: int(values._NAMED.fullmatch(t) is not None),
        ("a", " ", '"', '"a"', "<", "<a@b", "a <a@b>", "a@b")),
    *(Use(f"containmentbench.sandbox.values._DATE_FORMS[{i}]", p, scan(p),
          ("2026-01-05", "2026/1/5", "January 5, 2026", "5 of January 2026", "Jan", "2026-"))
      for i, p in enumerate(values._DATE_FORMS)),
    # partial follow (attacks/follow.py): injected sentences and committed arguments
    _s(follow, "_AT_DOMAIN", "@", "@a", "@a.", "@a.bc", "a@a.bc"),
    Use("containmentbench.attacks.follow.addresses_in()", None, call(follow.addresses_in),
        ("a@b.cd", "a@", ".@b.cd", "a.a.a", "%+@")),
    _s(follow, "_CANARY", "CB-CANARY-", "CB-CANARY-0123456789", "CB-CANARY-012345678"),
    _s(follow, "_SPACE", " ", "\t", " a"),
    # the literal-reader check: what an agent was shown (prompts, observations)
    _s(literal, "_ADDRESS", "<", "<a@", "<a@b", "<a@b>", "a@b>"),
    _s(literal, "_AT_DOMAIN", "@", "@b", "@b.", "@b.c", "a@b.c"),
    _s(literal, "_IDENTIFIER", "2026-01-0", "em-", "em-1", "cb-canary-", "#a"),
    Use("containmentbench.scenarios.literal.identifiers()", None, call(literal.identifiers),
        ("a@b.c", "a@", ".@b.c", "a.a.a", "em-1")),
    _s(literal, "_CANARY", "cb-canary-", "cb-canary-0", "cb-canary-0a"),
    _s(literal, "_QUOTED", '"', '"a', '"a b"', '""'),
    # hostile files a verb reads: an OTLP export's ids, a manifest's digests (fullmatch)
    Use("containmentbench.cim.otlp_shape._HEX", otlp_shape._HEX,
        lambda t: int(otlp_shape._HEX.fullmatch(t) is not None), ("0", "0a", "g", "0-")),
    Use("containmentbench.integrity.reading._SHA", reading._SHA,
        lambda t: int(reading._SHA.fullmatch(t) is not None), ("0" * 63, "0" * 64, "g")),
    # a table's column names (the report orders exclusion counters after the metrics)
    Use("containmentbench.report.html._EXCLUSION", report_html._EXCLUSION,
        lambda t: int(report_html.is_exclusion(t)), ("excluded_na", "fp_na", "unmatched", "n")),
)

# Modules that import ``re`` on text that is neither benchmark nor model text.
EXEMPT = {
    "containmentbench.config.compose": "Hydra's own error messages about a config",
    "containmentbench.pipeline.snake": "a wildcard constraint built from escaped model names",
    "containmentbench.pipeline.plan": "job marker file names (at most 255 bytes, ours)",
    "containmentbench.sources": "import lines of source files (the code digest of a layer "
                                "and of a defense: ours or the researcher's own code)",
    "containmentbench.defense.identity": "import lines of a defense's own source files (its "
                                         "code identity)",
    "containmentbench.integrity.records": "temporary file names beside an output (at most "
                                          "255 bytes, checked with fullmatch) and glob "
                                          "escapes of our own file names",
}

# Characters of every kind a pattern may treat specially.
GENERIC = ("a", "Z", "0", "_", ".", "@", " ", "\t", "\n", "\r", "-", "+", "/", "\\", "[", "]",
           "{", "}", "(", ")", '"', "'", ":", "=", ",", "<", ">", "`", "|", "!", "é", "\u202e")


def repeat(unit: str, n: int) -> str:
    """``unit`` repeated to exactly ``n`` characters."""
    return (unit * (n // len(unit) + 1))[:n]


def adversarial(use: Use) -> list[tuple[str, Callable[[int], str]]]:
    """(label, text of a given size): each near miss or awkward character repeated, then each
    near miss as a long run followed by a long run of each character, and alternating."""
    out: list[tuple[str, Callable[[int], str]]] = [
        (a, lambda n, a=a: repeat(a, n)) for a in (*use.atoms, *GENERIC)]
    for a in use.atoms:
        for b in GENERIC:
            out.append((f"{a}...{b}...",
                        lambda n, a=a, b=b: repeat(a, n // 2) + repeat(b, n - n // 2)))
            out.append((f"({a}{b})...", lambda n, a=a, b=b: repeat(a + b, n)))
    return out
