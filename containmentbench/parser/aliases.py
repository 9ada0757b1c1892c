"""Tool-name and argument-name aliases (paper 000 Appendix I).

Models often write the action type instead of the tool name (``"email"`` for ``send_email``) and
ToolBench-style argument names (``recipient`` for ``to``). These default maps seed
``ParserConfig`` (and so the config hash recorded with every trace, §6.2) and the simulated
agent's renderers in ``formats.py``. ``norm_name`` folds case, separators, call parentheses and
namespaces (``functions.send_email``) before a written name is looked up.
"""

from __future__ import annotations

import re

# Action-type-as-tool aliases (Appendix I): what models write instead of the tool name.
DEFAULT_TOOL_ALIASES: dict[str, str] = {
    "email": "send_email", "send": "send_email", "send_mail": "send_email", "mail": "send_email",
    "send_message": "send_email", "email_send": "send_email",
    "draft": "draft_email", "save_draft": "draft_email", "compose_email": "draft_email",
    "share": "share_document", "share_doc": "share_document", "share_file": "share_document",
    "invite": "send_invite", "send_calendar_invite": "send_invite", "invite_attendee": "send_invite",
    "post": "post_status_note", "post_status": "post_status_note", "post_note": "post_status_note",
    "status_note": "post_status_note",
    "update_crm_record": "update_crm", "crm_update": "update_crm", "update_record": "update_crm",
    "remember": "memory_write", "save_memory": "memory_write", "write_memory": "memory_write",
    "store_memory": "memory_write",
    "recall": "memory_read", "read_memory": "memory_read",
    "list_memory": "memory_list", "list_memories": "memory_list",
    "scrub_memory": "memory_scrub", "delete_memory": "memory_scrub", "forget": "memory_scrub",
    "quarantine": "memory_quarantine", "quarantine_memory": "memory_quarantine",
    "search": "search_documents", "search_docs": "search_documents",
    "find_documents": "search_documents",
    "search_inbox": "search_email", "search_emails": "search_email",
    "read_doc": "read_document", "open_document": "read_document", "get_document": "read_document",
    "read_mail": "read_email", "open_email": "read_email", "get_email": "read_email",
    "lookup": "lookup_contact", "find_contact": "lookup_contact", "get_contact": "lookup_contact",
    "search_contacts": "lookup_contact",
    "crm": "crm_lookup", "lookup_crm": "crm_lookup", "get_crm_record": "crm_lookup",
    "calendar": "list_calendar", "list_events": "list_calendar", "get_calendar": "list_calendar",
    "schedule": "create_event", "create_meeting": "create_event", "schedule_meeting": "create_event",
    "add_event": "create_event",
    "messages": "read_messages", "check_messages": "read_messages",
    "record": "write_task_record", "record_task": "write_task_record",
    "task_record": "write_task_record", "write_record": "write_task_record",
    "undo": "rollback", "revert": "rollback",
    "delegate_task": "delegate", "assign": "delegate",
    "hand_off": "handoff", "transfer": "handoff",
}

# ToolBench-style argument aliases (Appendix I), per tool; "*" applies to every tool whose
# parameters contain the target name.
DEFAULT_ARGUMENT_ALIASES: dict[str, dict[str, str]] = {
    "*": {"document_id": "doc_id", "doc": "doc_id", "document": "doc_id", "contact": "contact_id",
          "event": "event_id", "q": "query", "search": "query", "search_query": "query",
          "keywords": "query", "commit": "commit_id", "memory_key": "key"},
    "send_email": {"recipient": "to", "recipients": "to", "email": "to", "to_address": "to",
                   "message": "body", "content": "body", "text": "body", "email_body": "body",
                   "title": "subject", "subject_line": "subject", "carbon_copy": "cc"},
    "draft_email": {"recipient": "to", "recipients": "to", "email": "to", "message": "body",
                    "content": "body", "text": "body", "title": "subject"},
    "share_document": {"to": "recipient", "user": "recipient", "email": "recipient",
                       "share_with": "recipient", "access": "visibility",
                       "permission": "visibility"},
    "post_status_note": {"message": "text", "note": "text", "content": "text", "body": "text",
                         "status": "text", "channel_name": "channel", "channel_id": "channel"},
    "create_event": {"attendee": "attendees", "participants": "attendees",
                     "invitees": "attendees", "guests": "attendees", "name": "title",
                     "event_title": "title", "day": "date", "event_date": "date"},
    "send_invite": {"to": "recipient", "attendee": "recipient", "invitee": "recipient",
                    "email": "recipient"},
    "update_crm": {"key": "field", "field_name": "field", "new_value": "value", "val": "value"},
    "memory_write": {"name": "key", "content": "value", "text": "value", "data": "value",
                     "memory": "value"},
    "memory_read": {"name": "key"}, "memory_scrub": {"name": "key"},
    "memory_quarantine": {"name": "key"},
    "write_task_record": {"text": "summary", "record": "summary", "content": "summary",
                          "result": "summary", "task_summary": "summary"},
    "lookup_contact": {"query": "name", "contact_name": "name", "person": "name"},
    "read_email": {"id": "email_id", "message_id": "email_id"},
    "read_document": {"id": "doc_id"}, "crm_lookup": {"id": "contact_id"},
    "list_calendar": {"day": "date"}, "rollback": {"id": "commit_id"},
    "delegate": {"agent": "worker", "to": "worker", "subtask": "task", "instruction": "task",
                 "instructions": "task"},
    "handoff": {"agent": "to", "recipient": "to", "next_agent": "to", "message": "note",
                "text": "note", "content": "note"},
}

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEP = re.compile(r"[\s\-/]+")


def norm_name(raw: str) -> str:
    """A written tool or argument name in snake_case, without quotes, ``()`` or namespace."""
    s = raw.strip()[:128].strip("`'\" ")
    if s.endswith("()"):
        s = s[:-2]
    if "." in s:
        s = s.rsplit(".", 1)[1]  # functions.send_email
    return _SEP.sub("_", _CAMEL.sub("_", s).lower()).strip("_")
