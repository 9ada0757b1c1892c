"""The AgentDojo tool table: which native tools are sinks, and their authority fields.

Paper 000 §6.4 projects "only sink-level user authorization into the ledger". A sink is a
tool whose execution changes the environment or reaches outside it (mail, messages, money,
files, bookings, web requests); it is high-risk (HighRisk(q), §4.4) and goes through the
policy's full decision. Every other tool is a low-risk read. The authority fields of a sink
decide who or what it reaches (recipients, targets, ids, credentials) and are what the
ledger match and the tool boundary compare (eq. 9's target and authority clauses); content
fields (subject, body, amount ...) are free, as in our own ledger.

The table covers every tool of the four suites of the pinned benchmark version; a test checks
that no tool is missing and that a tool declared read-only never changes the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# benchmark version of the suites we run (pinned with the package, agentdojo==0.1.35)
BENCHMARK_VERSION = "v1.2.2"
SUITES = ("workspace", "slack", "banking", "travel")


@dataclass(frozen=True, slots=True)
class Sink:
    verb: str                         # CIM Tier-1 verb (paper 002 Appendix B.2)
    authority: tuple[str, ...]        # authority-bearing argument names


SINKS: dict[str, Sink] = {
    # workspace (and travel's send_email / calendar)
    "send_email": Sink("share", ("recipients", "cc", "bcc", "attachments")),
    "delete_email": Sink("delete", ("email_id",)),
    "create_calendar_event": Sink("write", ("participants",)),
    "cancel_calendar_event": Sink("delete", ("event_id",)),
    "reschedule_calendar_event": Sink("write", ("event_id",)),
    "add_calendar_event_participants": Sink("share", ("event_id", "participants")),
    "append_to_file": Sink("write", ("file_id",)),
    "create_file": Sink("write", ("filename",)),
    "delete_file": Sink("delete", ("file_id",)),
    "share_file": Sink("share", ("file_id", "email", "permission")),
    # slack (a fetched web page is recorded in the environment's web-request log: egress)
    "add_user_to_channel": Sink("share", ("user", "channel")),
    "send_direct_message": Sink("share", ("recipient",)),
    "send_channel_message": Sink("share", ("channel",)),
    "invite_user_to_slack": Sink("share", ("user", "user_email")),
    "remove_user_from_slack": Sink("delete", ("user",)),
    "get_webpage": Sink("invoke", ("url",)),
    "post_webpage": Sink("share", ("url",)),
    # banking
    "send_money": Sink("share", ("recipient",)),
    "schedule_transaction": Sink("share", ("recipient",)),
    "update_scheduled_transaction": Sink("write", ("id", "recipient")),
    "update_password": Sink("write", ("password",)),
    "update_user_info": Sink("write", ("first_name", "last_name", "street", "city")),
    # travel
    "reserve_hotel": Sink("write", ("hotel",)),
    "reserve_car_rental": Sink("write", ("company",)),
    "reserve_restaurant": Sink("write", ("restaurant",)),
}


def is_sink(tool: str) -> bool:
    return tool in SINKS


def verb(tool: str) -> str:
    return SINKS[tool].verb if tool in SINKS else "read"


def norm(value: Any) -> Any:
    """Normalized authority value: case- and space-insensitive strings, lists as sorted
    sets, empty as None (an omitted ``cc`` equals an empty one)."""
    if value in (None, "", [], ()):
        return None
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, (list, tuple)):
        return tuple(sorted({str(norm(v)) for v in value}))
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def authority_key(tool: str, args: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """(tool, normalized authority fields): the sink-level identity of a call."""
    fields = SINKS[tool].authority if tool in SINKS else ()
    return tool, tuple((f, norm(args.get(f))) for f in fields)


def key_json(key: tuple[str, tuple[tuple[str, Any], ...]]) -> dict[str, Any]:
    return {"tool": key[0], "authority": {f: (list(v) if isinstance(v, tuple) else v)
                                          for f, v in key[1]}}
