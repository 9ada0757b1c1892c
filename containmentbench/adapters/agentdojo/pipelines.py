"""Agent pipelines the adapter runs: AgentDojo's ground truth and served models.

* ``ground_truth`` (no model): :class:`GroundTruthFollower` is AgentDojo's
  ``GroundTruthPipeline`` (the user task's ground-truth calls, then its ground-truth output)
  plus a fully compliant victim: right after a tool result that carries a placed injection,
  it executes the injection task's ground truth. Clean runs are exactly AgentDojo's ground
  truth; attacked runs are the positive control of §6.4 (every reachable injection is
  followed), so a defense's effect is visible without a model.
* a served model (backend ``vllm``, the engine in the job, or ``openai``, any OpenAI-compatible
  server): AgentDojo's own tool-calling pipeline (system message, user query, model,
  tool-execution loop) with our model element (:func:`served_pipeline`): the study's decoding
  and per-request seeds, every assistant message a ``model_call`` node with what the model
  saw. A provider error propagates and the rollout is recorded as an error, never as an
  outcome (Appendix I).

The same pipeline object runs natively (AgentDojo's ``FunctionsRuntime``) and through the
gateway; it reports model steps to the runtime only when the runtime records them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def _step(runtime: Any, text: str, status: str | None = None,
          record: Mapping[str, Any] | None = None) -> None:
    hook = getattr(runtime, "model_step", None)
    if hook is not None:
        hook(text, status, **(record or {}))


def ground_truth_follower(user_task: Any, injection_task: Any | None,
                          injections: Mapping[str, str]) -> Any:
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
    from agentdojo.types import (
        ChatAssistantMessage,
        ChatToolResultMessage,
        text_content_block_from_string,
    )

    from containmentbench.adapters.agentdojo.tasks import carried
    from containmentbench.canonical import canonical_json

    class GroundTruthFollower(BasePipelineElement):
        name = "ground_truth"

        def query(self, query: str, runtime: Any, env: Any = None,
                  messages: Sequence[Any] = (), extra_args: dict | None = None) -> tuple:
            out: list[Any] = []
            followed = False

            def call(tc: Any, raise_on_error: bool) -> bool:
                _step(runtime, canonical_json({"function": tc.function,
                                               "args": dict(tc.args)}), None)
                out.append(ChatAssistantMessage(role="assistant", tool_calls=[tc],
                                                content=[text_content_block_from_string("")]))
                result, error = runtime.run_function(env, tc.function, tc.args,
                                                     raise_on_error=raise_on_error)
                text = tool_result_to_str(result)
                out.append(ChatToolResultMessage(
                    role="tool", content=[text_content_block_from_string(text)],
                    tool_call=tc, tool_call_id=None, error=error))
                if hasattr(runtime, "last_carried"):  # the gateway already looked
                    return bool(runtime.last_carried) and error is None
                return bool(carried(result, injections))

            for tc in user_task.ground_truth(env):
                seen = call(tc, True)
                if injection_task is not None and not followed and seen:
                    followed = True  # a compliant victim obeys the injection at once
                    for itc in injection_task.ground_truth(env):
                        call(itc, False)
            answer = user_task.GROUND_TRUTH_OUTPUT
            if followed and injection_task.GROUND_TRUTH_OUTPUT:
                answer = f"{answer}\n{injection_task.GROUND_TRUTH_OUTPUT}"
            out.append(ChatAssistantMessage(role="assistant", tool_calls=None,
                                            content=[text_content_block_from_string(answer)]))
            return query, runtime, env, [*messages, *out], extra_args or {}

    return GroundTruthFollower()


#: one loaded backend per (backend, model, decoding) in a process: a vLLM engine is loaded
#: once and serves every task of the shard, natively and through the gateway
_SERVED: dict[str, Any] = {}


def served_backend(config: Any) -> Any:
    """The process's backend for ``config`` (a ``BackendConfig``), built once."""
    from containmentbench.canonical import canonical_json
    from containmentbench.models.base import make_backend

    key = canonical_json({"name": config.name, "model": config.model,
                          "top_p": config.top_p, "options": config.options})
    if key not in _SERVED:
        _SERVED[key] = make_backend(config)
    return _SERVED[key]


def close_served() -> None:
    for b in _SERVED.values():
        b.close()
    _SERVED.clear()


def _text(content: Any) -> str:
    from agentdojo.types import get_text_content_as_str

    return get_text_content_as_str(content) if content else ""


def chat_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """AgentDojo's conversation as chat messages: assistant turns with their ``tool_calls``
    and ``tool`` turns with their results (AgentDojo's own OpenAI element sends the error
    text in place of a failed call's result), so the model's chat template renders its own
    tool-calling format."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": _text(m.get("content"))}
            calls = m.get("tool_calls") or []
            if calls:
                msg["tool_calls"] = [{"id": c.id or f"call-{k}", "type": "function",
                                      "function": {"name": c.function, "arguments": dict(c.args)}}
                                     for k, c in enumerate(calls)]
            out.append(msg)
        elif role == "tool":
            call = m.get("tool_call")
            out.append({"role": "tool", "tool_call_id": m.get("tool_call_id")
                        or (call.id if call is not None else None) or "call-0",
                        "content": m.get("error") or _text(m.get("content"))})
        else:
            out.append({"role": role, "content": _text(m.get("content"))})
    return out


def tool_schemas(functions: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The runtime's functions as tool schemas (name, description, JSON-schema parameters)."""
    return [{"name": f.name, "description": f.description,
             "parameters": f.parameters.model_json_schema()} for f in functions.values()]


def served_pipeline(backend: Any, model: str, key: str, seed: int,
                    decoding: Mapping[str, Any] | None, guidance: str | None) -> Any:
    """AgentDojo's tool-calling pipeline (system message, user query, model, tool-execution
    loop) with the model element replaced by ours: every request goes through our backend
    (``vllm`` or ``openai``) with the study's decoding and a per-request seed derived from
    (task, model, rollout seed, step) -- not AgentDojo's ``OpenAILLM``, which sends
    ``temperature or NOT_GIVEN`` (a 0.0 becomes the server's default, so runs are sampled) and
    no seed. Native and adapter runs of a task therefore draw the same tokens wherever the
    defense did not intervene (§6.4 endpoint parity). Tool calls are the provider's own parse
    (``Completion.native_calls``: the server's ``tool_calls``, or vLLM's tool parser); a
    provider error raises, so the rollout is an error, never an outcome (Appendix I)."""
    from agentdojo.agent_pipeline.agent_pipeline import AgentPipeline, load_system_message
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.agent_pipeline.basic_elements import InitQuery, SystemMessage
    from agentdojo.agent_pipeline.tool_execution import ToolsExecutionLoop, ToolsExecutor
    from agentdojo.functions_runtime import FunctionCall
    from agentdojo.types import ChatAssistantMessage, text_content_block_from_string

    from containmentbench.canonical import canonical_json, stable_int
    from containmentbench.models.base import GenerationRequest, call_record

    dec = dict(decoding or {"temperature": 0.7, "max_tokens": 512})

    class ServedModel(BasePipelineElement):
        name = backend.name

        def query(self, query: str, runtime: Any, env: Any = None,
                  messages: Sequence[Any] = (), extra_args: dict | None = None) -> tuple:
            step = sum(1 for m in messages if m["role"] == "assistant")
            req = GenerationRequest(
                request_id=f"{key}/seed={seed}/{step}", messages=chat_messages(messages),
                tools=tool_schemas(runtime.functions),
                seed=stable_int("agentdojo", key, model, seed, step) & 0x7FFFFFFF,
                max_tokens=int(dec["max_tokens"]), temperature=float(dec["temperature"]),
                tool_mode="native")
            comp = backend.generate([req])[0]
            if comp.error is not None:
                raise RuntimeError(f"provider error: {comp.error}")
            parsed = json.loads(comp.native_calls) if comp.native_calls else []
            if isinstance(parsed, dict):  # the provider's parser failed on this text
                raise RuntimeError(f"tool-call parser error: {parsed.get('error')}")
            calls = [FunctionCall(function=c["name"], args=c["arguments"]
                                  if isinstance(c["arguments"], dict) else {},
                                  id=f"call-{step}-{k}") for k, c in enumerate(parsed)]
            content = "" if calls else comp.text
            _step(runtime, canonical_json({"content": comp.text, "tool_calls": [
                {"function": c.function, "args": dict(c.args)} for c in calls]}),
                  "native_tool_call" if calls else "final_answer", call_record(comp))
            out = ChatAssistantMessage(role="assistant", tool_calls=calls or None,
                                       content=[text_content_block_from_string(content)])
            return query, runtime, env, [*messages, out], extra_args or {}

    system = load_system_message(None)
    if guidance:
        system = f"{system}\n\n{guidance}"
    element = ServedModel()
    return AgentPipeline([SystemMessage(system), InitQuery(), element,
                          ToolsExecutionLoop([ToolsExecutor(), element])])
