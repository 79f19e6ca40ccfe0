"""The readiness probe: the endpoint kind the sweep uses, a 200 that is not JSON is "not ready" (said in the
error), and every probe is cut off at the time left of engine.startup_timeout_s."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from specbench.config import parse_config
from specbench.runner import RunOptions, run_matrix
from specbench.server.engines.command import CommandEngine
from specbench.server.launch import sweep_facts
from tests.conftest import make_model_dir, needs_standin, standin_config


def _engine(endpoint: str) -> CommandEngine:
    cfg = parse_config({"model": {"path": "/m"}, "engine": {"kind": "command", "command": ["srv"]},
                        "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True}],
                        "sweep": {"output_lens": [8], "concurrency": [1], "endpoint": endpoint}})
    return CommandEngine(cfg.engine, sweep_facts(cfg), "/m", "m")


def _probe(engine: CommandEngine, handler) -> Any:
    async def go() -> Any:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            return await engine.probe_ready(http, "http://engine")

    return asyncio.run(go())


def _no_chat_template(request: httpx.Request) -> httpx.Response:
    """A base model without a chat template: completions work, chat is refused."""
    if request.url.path == "/v1/completions":
        assert "prompt" in json.loads(request.content)
        return httpx.Response(200, json={"choices": [{"text": "x", "index": 0}]})
    return httpx.Response(400, json={"error": "this model has no chat template"})


def test_probe_uses_the_completions_endpoint_when_the_sweep_does() -> None:
    assert _probe(_engine("completions"), _no_chat_template)
    not_ready = _probe(_engine("chat"), _no_chat_template)
    assert not not_ready and "/v1/chat/completions: HTTP 400" in not_ready.detail


def test_probe_with_a_200_that_is_not_json_is_not_ready() -> None:
    body = 'data: {"choices": [{"delta": {"content": "x"}}]}\n\ndata: [DONE]\n\n'
    result = _probe(_engine("chat"), lambda r: httpx.Response(200, text=body))
    assert not result
    assert "HTTP 200 with a body that is not JSON" in result.detail and "data: " in result.detail


# A server that is not an engine: `silent` accepts connections and never answers, `stream` answers every
# request with a 200 SSE body (a wrapper that always streams).
BAD_SERVER = r"""
import socket, sys
port, mode = int(sys.argv[1]), sys.argv[2]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(64)
print("listening", flush=True)
held = []
while True:
    c, _ = s.accept()
    if mode == "silent":
        held.append(c)
        continue
    data = b""
    while b"\r\n\r\n" not in data:
        data += c.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next((int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")), 0)
    while len(rest) < length:
        rest += c.recv(65536)
    body = b'data: {"choices": [{"delta": {"content": "x"}}]}\n\ndata: [DONE]\n\n'
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n"
              b"Connection: close\r\n\r\n" % len(body) + body)
    c.close()
"""


@needs_standin
def test_bad_probe_answers_fail_their_variant_within_the_startup_timeout(tmp_path: Path, port: int,
                                                                        no_survivors) -> None:
    model = make_model_dir(tmp_path / "model")
    script = tmp_path / "bad_server.py"
    script.write_text(BAD_SERVER)
    variants: list[dict[str, Any]] = [
        {"name": "base", "drafter": "autoregressive", "baseline": True},
        {"name": "silent", "drafter": "ngram", "command": ["{python}", str(script), "{port}", "silent"]},
        {"name": "stream", "drafter": "ngram", "command": ["{python}", str(script), "{port}", "stream"]},
    ]
    cfg = standin_config(model, port, variants=variants, engine={"startup_timeout_s": 5})
    out = tmp_path / "run"
    res = run_matrix(parse_config(cfg), RunOptions(out=out, skip_preflight=True))
    assert res.status == {"base": "done", "silent": "failed", "stream": "failed"}
    vm = json.loads((out / "run.json").read_text())["variants"]
    assert "not ready after 5s" in vm["silent"]["reason"]
    assert vm["silent"]["wall_s"] < 15, "a probe that hangs must not outlive engine.startup_timeout_s"
    assert "not ready after 5s" in vm["stream"]["reason"]
    assert "HTTP 200 with a body that is not JSON" in vm["stream"]["reason"]
    no_survivors()


@needs_standin
def test_another_served_model_name_fails_at_once_with_the_servers_reason_and_names(tmp_path: Path, port: int,
                                                                                   no_survivors) -> None:
    """The engine runs but serves another model name: its probe answers 404. The variant fails with the
    server's own reason and the names GET /v1/models lists, as soon as the server answered, not at
    engine.startup_timeout_s (60 s: far beyond the stand-in's startup, so reaching it is a failure)."""
    model = make_model_dir(tmp_path / "model")
    cfg = standin_config(model, port, faults={"ngram": ["--served-model-name", "smollm2", "--strict-model"]},
                         engine={"startup_timeout_s": 60})
    out = tmp_path / "run"
    res = run_matrix(parse_config(cfg), RunOptions(out=out, skip_preflight=True))
    assert res.status == {"base": "done", "ngram": "failed"}
    reason = json.loads((out / "run.json").read_text())["variants"]["ngram"]["reason"]
    assert "the server serves 'smollm2', not 'standin' (model.served_name)" in reason, reason
    assert "HTTP 404: The model `standin` does not exist." in reason, reason
    assert "not ready after" not in reason  # failed on the answer, not on the startup timeout
    no_survivors()


def test_error_reason_reads_the_usual_error_bodies() -> None:
    from specbench.server.engines.base import error_reason

    def resp(body: Any, status: int = 404) -> httpx.Response:
        return httpx.Response(status, content=body if isinstance(body, bytes) else json.dumps(body).encode())

    assert error_reason(resp({"object": "error", "message": "The model `x` does not exist."})) == \
        "The model `x` does not exist."  # vLLM
    assert error_reason(resp({"error": {"message": "no such model", "type": "invalid_request_error"}})) == \
        "no such model"  # OpenAI
    assert error_reason(resp({"detail": "Not Found"})) == "Not Found"  # FastAPI
    assert error_reason(resp(b"<html>\n  gone </html>")) == "<html> gone </html>"
