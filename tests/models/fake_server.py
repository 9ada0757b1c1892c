"""A small fake OpenAI-compatible server on 127.0.0.1 (stdlib http.server, port 0) for tests
of model discovery and the serving record (models/serving.py), and for runs through
``backend=openai`` that need a server to answer ``/v1/models``.

``kind`` says which engine it pretends to be, by the endpoints that engine really has:
``vllm`` (``owned_by: vllm`` in /v1/models, ``GET /version``), ``llamacpp`` (``GET /props``
with ``chat_template`` and ``build_info``), ``ollama`` (``GET /api/version``, ``POST
/api/show``) or ``plain`` (only /v1/models and chat completions). Every chat completion
answers ``{"final_answer": "Done."}`` under the requested model name.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeServer:
    def __init__(self, models: list[str], kind: str = "plain", version: str = "0.6.1",
                 template: str = "{{ messages }}", quantization: str = "Q4_K_M",
                 root: str | None = None, port: int = 0) -> None:
        self.models, self.kind, self.version = models, kind, version
        self.template, self.quantization, self.root = template, quantization, root
        self.port = port  # 0: any free port
        self.paths: list[str] = []  # every path asked, in order
        self.chat_models: list[str] = []  # the "model" of every chat request

    # -- the HTTP side ------------------------------------------------------------------

    def _answer(self, method: str, path: str, body: dict[str, Any] | None
                ) -> tuple[int, Any]:
        self.paths.append(f"{method} {path}")
        owner = {"vllm": "vllm", "llamacpp": "llamacpp", "ollama": "library"}.get(self.kind,
                                                                                 "me")
        if method == "GET" and path == "/v1/models":
            data = []
            for m in self.models:
                e: dict[str, Any] = {"id": m, "object": "model", "owned_by": owner}
                if self.kind == "vllm":
                    e.update(root=self.root or m, max_model_len=8192)
                data.append(e)
            return 200, {"object": "list", "data": data}
        if method == "POST" and path == "/v1/chat/completions":
            assert body is not None
            self.chat_models.append(body["model"])
            return 200, {"id": "c", "object": "chat.completion", "model": body["model"],
                         "choices": [{"index": 0, "finish_reason": "stop", "message": {
                             "role": "assistant", "content": '{"final_answer": "Done."}'}}],
                         "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
        if self.kind == "vllm" and method == "GET" and path == "/version":
            return 200, {"version": self.version}
        if self.kind == "llamacpp" and method == "GET" and path == "/props":
            return 200, {"chat_template": self.template, "build_info": self.version,
                         "model_path": f"/models/{self.models[0]}.gguf"}
        if self.kind == "ollama" and method == "GET" and path == "/api/version":
            return 200, {"version": self.version}
        if self.kind == "ollama" and method == "POST" and path == "/api/show":
            return 200, {"template": self.template,
                         "details": {"quantization_level": self.quantization}}
        return 404, {"error": "not found"}

    def __enter__(self) -> FakeServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, method: str) -> None:
                n = int(self.headers.get("Content-Length", 0) or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                status, payload = fake._answer(method, self.path, body)
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self._reply("GET")

            def do_POST(self) -> None:
                self._reply("POST")

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
