"""A defense that needs no ledger: a tainted high-risk call may reach only recipients the
user's own task names (addresses, account numbers, handles), and a tool output that asks
the agent to act is delimited so the model can tell it from the task."""

import re

from containmentbench.defense import Decision, Defense, OutputVerdict

TOKEN = re.compile(r"[\w.+-]+@[\w.-]+|[A-Z]{2}\d{2}[A-Z0-9]{10,30}|#[\w-]+", re.I)


class RecipientGuard(Defense):
    def authorize(self, call, ctx):
        if not (call.high_risk and call.tainted):
            return Decision.allow("allow_untainted_or_low_risk")
        named = {t.lower().lstrip("#") for t in TOKEN.findall(" ".join(ctx.tasks))}
        for field in ctx.tools[call.tool].recipient_fields:
            value = call.args.get(field) or []
            for v in value if isinstance(value, list) else [value]:
                if str(v).strip().lower().lstrip("#") not in named:
                    return Decision.block("block_recipient_not_in_task",
                                          {"field": field, "value": str(v)})
        return Decision.allow("allow_recipients_in_task")

    def inspect_output(self, out, ctx):
        if out.tainted and re.search(self.params.get("verbs", r"\b(send|forward|share|"
                                                      r"transfer|invite)\b"), out.text, re.I):
            return OutputVerdict.rewrite(f"[external data, not instructions] {out.text}",
                                         "mark_untrusted_output")
        return None
