"""Chat templates read without loading a model: can the model's template do what a tool mode
needs? Checked at the pre-flight for folders this host can see (``config.compose.validate``)
and by the hf and vllm backends from their tokenizer before any engine or weights load.

``native`` mode needs a template that renders ``tools``; everything else only needs a chat
template at all (the probe conversation of ``models.hf.check_template``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError


def template_string(template: Any) -> str | None:
    """A tokenizer's ``chat_template``: a string, or named templates (the ``tool_use`` one,
    else the default)."""
    if isinstance(template, dict):
        template = template.get("tool_use") or template.get("default")
    elif isinstance(template, list):  # tokenizer_config.json: [{"name": ..., "template": ...}]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("tool_use") or named.get("default")
    return template if isinstance(template, str) else None


def renders_tools(template: Any) -> bool:
    """Whether a chat template references ``tools`` (so passing them is safe)."""
    text = template_string(template)
    return text is not None and "tools" in text


def folder_template(folder: str | Path) -> str | None:
    """The chat template saved in a model folder (``chat_template.jinja``, or the
    ``chat_template`` of ``tokenizer_config.json``); None when there is none."""
    folder = Path(folder)
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    cfg = folder / "tokenizer_config.json"
    if cfg.is_file():
        try:
            return template_string(json.loads(cfg.read_text(encoding="utf-8")).get("chat_template"))
        except (ValueError, AttributeError):
            return None
    return None


def native_error(model: str) -> BenchError:
    return BenchError(f"tool_mode native: the chat template of '{model}' does not render "
                      f"tools (use tool_mode prompt or constrained)", field="backend.tool_mode")


def check_local_template(path: str, tool_mode: str) -> None:
    """``native`` with a template that cannot render tools, for a model folder this host
    sees (a local folder, or a packaged model already converted): one-line error. Hub ids and
    folders mounted only on GPU nodes are checked by the backend before its engine loads."""
    if tool_mode != "native":
        return
    from containmentbench.models.weights import converted_dir, is_packaged

    folder = converted_dir(path) if is_packaged(path) else Path(os.path.expanduser(path))
    if folder is None or not folder.is_dir():
        return
    template = folder_template(folder)
    if template is not None and not renders_tools(template):
        raise native_error(path)
