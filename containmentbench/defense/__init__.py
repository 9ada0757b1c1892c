"""The defense API: the project's stable public surface for runtime defenses.

Write a :class:`Defense`, override the hooks you need, register it (an entry point of the
``containmentbench.defenses`` group, or ``impl: file.py:Class`` in a defenses file) and run a
study with it beside the seven defenses of paper 000 Table 8 (docs/defenses.md)::

    from containmentbench.defense import Decision, Defense

    class NoExternalMail(Defense):
        def authorize(self, call, ctx):
            to = call.args.get("to", "")
            if call.tool == "send_email" and not str(to).endswith("@corp.local"):
                return Decision.block("block_external_mail", {"to": to})
            return Decision.allow("allow")

Everything a hook receives is in this module's namespace; nothing else of the package is
part of the API.
"""

from containmentbench.defense.api import (
    ALLOW,
    ASSUMPTIONS,
    BLOCK,
    CONFIRM,
    FLAG,
    HOOKS,
    KEEP,
    PASS,
    REDACT,
    REWRITE,
    ROLLBACK,
    WITHHOLD,
    AnswerVerdict,
    CommitVerdict,
    Confirmation,
    Decision,
    Defense,
    DefenseConfig,
    DefenseError,
    HookError,
    OutputVerdict,
    TaskPlan,
    UndeclaredAssumption,
)
from containmentbench.defense.context import (
    AgentInfo,
    Answer,
    Boundary,
    Commit,
    DataLabels,
    DefenseContext,
    Ledger,
    ModelService,
    Param,
    SourceInfo,
    TaskView,
    ToolCall,
    ToolInfo,
    ToolOutput,
    TraceView,
)

__all__ = [
    "ALLOW", "ASSUMPTIONS", "BLOCK", "CONFIRM", "FLAG", "HOOKS", "KEEP", "PASS", "REDACT",
    "REWRITE", "ROLLBACK", "WITHHOLD", "AgentInfo", "Answer", "AnswerVerdict", "Boundary",
    "Commit", "CommitVerdict", "Confirmation", "DataLabels", "Decision", "Defense",
    "DefenseConfig", "DefenseContext", "DefenseError", "HookError", "Ledger", "ModelService",
    "OutputVerdict", "Param", "SourceInfo", "TaskPlan", "TaskView", "ToolCall", "ToolInfo",
    "ToolOutput", "TraceView", "UndeclaredAssumption",
]
