"""Agent pipelines the adapter runs: AgentDojo's ground truth and served models.

* ``ground_truth`` (no model): :class:`GroundTruthFollower` is AgentDojo's
  ``GroundTruthPipeline`` (the user task's ground-truth calls, then its ground-truth output)
  plus a fully compliant victim: right after a tool result that carries a placed injection,
  it executes the injection task's ground truth. Clean runs are exactly AgentDojo's ground
  truth; attacked runs are the positive control of §6.4 (every reachable injection is
  followed), so a defense's effect is visible without a model.
* a backend name (``openai``: any OpenAI-compatible server, e.g. ``vllm serve``): AgentDojo's
  own tool-calling pipeline (system message, user query, model, tool-execution loop) with a
  recording wrapper around the model element, so every assistant message is a ``model_call``
  node. A provider error propagates and the rollout is recorded as an error, never as an
  outcome (Appendix I).

The same pipeline object runs natively (AgentDojo's ``FunctionsRuntime``) and through the
gateway; it reports model steps to the runtime only when the runtime records them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from containmentbench.errors import BenchError


def _step(runtime: Any, text: str, status: str | None = None) -> None:
    hook = getattr(runtime, "model_step", None)
    if hook is not None:
        hook(text, status)


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


def served_pipeline(backend: Mapping[str, Any], model: str, guidance: str | None,
                    seed: int) -> Any:
    """AgentDojo's tool-calling pipeline against an OpenAI-compatible server."""
    if backend["name"] != "openai":
        raise BenchError(f"the AgentDojo adapter runs 'ground_truth' or an OpenAI-compatible "
                         f"backend ('openai', e.g. vllm serve), not '{backend['name']}'",
                         field="pipeline")
    import openai
    from agentdojo.agent_pipeline.agent_pipeline import AgentPipeline, load_system_message
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.agent_pipeline.basic_elements import InitQuery, SystemMessage
    from agentdojo.agent_pipeline.llms.openai_llm import OpenAILLM
    from agentdojo.agent_pipeline.tool_execution import ToolsExecutionLoop, ToolsExecutor

    from containmentbench.canonical import canonical_json

    opts = backend.get("options", {})
    client = openai.OpenAI(base_url=opts.get("base_url"), api_key=opts.get("api_key", "EMPTY"),
                           max_retries=int(opts.get("max_retries", 5)),
                           timeout=float(opts.get("timeout_s", 120)))
    llm = OpenAILLM(client, model, temperature=float(backend.get("temperature", 0.0)))

    class Recording(BasePipelineElement):
        name = model

        def query(self, query: str, runtime: Any, env: Any = None,
                  messages: Sequence[Any] = (), extra_args: dict | None = None) -> tuple:
            out = llm.query(query, runtime, env, messages, extra_args or {})
            last = out[3][-1]
            calls = [{"function": c.function, "args": dict(c.args)}
                     for c in (last.get("tool_calls") or [])]
            text = "\n".join(b["content"] for b in (last.get("content") or [])
                             if b.get("content"))
            _step(runtime, canonical_json({"content": text, "tool_calls": calls}),
                  "native_tool_call" if calls else "final_answer")
            return out

    system = load_system_message(None)
    if guidance:
        system = f"{system}\n\n{guidance}"
    rec = Recording()
    return AgentPipeline([SystemMessage(system), InitQuery(), rec,
                          ToolsExecutionLoop([ToolsExecutor(), rec])])
