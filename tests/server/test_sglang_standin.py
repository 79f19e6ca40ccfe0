"""SGLang wire formats through the stand-in server (tests/standin), and the whole SGLang path (launch,
readiness, sweep, acceptance, teardown) through the fake `sglang.launch_server`, including a variant that
dies at startup with a library-version error."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from specbench.client.httpx_transport import HttpxTransport
from specbench.client.stream import Endpoint, stream_request
from specbench.config import parse_config
from specbench.server.engines.base import RequestSpec, dist_version
from specbench.server.engines.sglang import SGLangEngine, parse_sglang_spec
from specbench.server.launch import sweep_facts

REPO = Path(__file__).resolve().parents[2]
FAKE = REPO / "tests" / "standin" / "fake_sglang"


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(url: str, proc: subprocess.Popen, timeout: float = 15.0) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"stand-in exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/v1/models", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise TimeoutError(url)


@pytest.fixture
def standin() -> Iterator:
    procs: list[subprocess.Popen] = []

    def start(fmt: str, *flags: str) -> str:
        port = _port()
        p = subprocess.Popen([sys.executable, "-m", "tests.standin.server", "--port", str(port), "--format", fmt,
                              *flags], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(p)
        url = f"http://127.0.0.1:{port}"
        _wait_listening(url, p)
        return url

    yield start
    for p in procs:
        p.terminate()
        p.wait(5)


CFG = parse_config({"model": {"path": "/m"}, "engine": {"kind": "sglang", "version": "0.5.23"},
                    "variants": [{"name": "a", "drafter": "autoregressive", "baseline": True}],
                    "sweep": {"output_lens": [8], "concurrency": [1]}})
REQ = RequestSpec(messages=[{"role": "user", "content": "Write a poem"}], prompt_text="Write a poem",
                  max_tokens=64, temperature=0.0, seed=0)


async def _stream(url: str, engine: SGLangEngine):
    async with httpx.AsyncClient() as http:
        return await stream_request(Endpoint(engine, HttpxTransport(http), url, 10), REQ)


def test_openai_stream_carries_sglext_spec_details(standin) -> None:
    url = standin("sglang", "--accept-rate", "0.7", "--drafts-per-step", "3")
    res = asyncio.run(_stream(url, SGLangEngine(CFG.engine, sweep_facts(CFG), "/m", "standin")))
    assert res.error is None and res.output_tokens == 64 and sum(res.chunk_tokens) == 64
    s = res.spec
    assert s is not None and s.verify_steps == len(res.chunk_tokens)  # one chunk per verify step
    assert s.proposed_drafts == 3 * s.verify_steps and s.accepted_drafts == 64 - s.verify_steps
    assert s.reported_accept_length == pytest.approx(64 / s.verify_steps)
    assert sum(s.accept_histogram or []) == s.verify_steps


def test_baseline_stream_has_no_spec_and_same_text(standin) -> None:
    spec_url = standin("sglang", "--accept-rate", "0.5")
    plain_url = standin("sglang")
    eng = SGLangEngine(CFG.engine, sweep_facts(CFG), "/m", "standin")
    a, b = asyncio.run(_stream(spec_url, eng)), asyncio.run(_stream(plain_url, eng))
    assert b.spec is None and a.text == b.text  # greedy output does not depend on speculation


def test_native_generate_both_generations(standin) -> None:
    for fmt, key in (("sglang", "spec_num_correct_drafts"), ("sglang-0.5.9", "spec_accept_token_num")):
        url = standin(fmt, "--accept-rate", "0.6")
        r = httpx.post(f"{url}/generate", json={"text": "hello", "sampling_params": {"max_new_tokens": 40,
                                                                                     "ignore_eos": True}})
        data = r.json()
        assert key in data["meta_info"]
        s = parse_sglang_spec(data)
        assert s is not None and s.verify_steps == data["meta_info"]["spec_verify_ct"]
        assert s.accepted_drafts == 40 - s.verify_steps and s.accept_histogram


def test_0_5_9_has_no_sglext_and_streaming_chat_rejects_token_ids(standin) -> None:
    url = standin("sglang-0.5.9", "--accept-rate", "0.6")
    old = parse_config({**CFG.model_dump(mode="json", exclude_none=True),
                        "engine": {"kind": "sglang", "version": "0.5.9"}})
    res = asyncio.run(_stream(url, SGLangEngine(old.engine, sweep_facts(old), "/m", "standin")))
    assert res.error is None and res.spec is None
    r = httpx.post(f"{url}/v1/chat/completions", json={"messages": [], "stream": True, "return_token_ids": True})
    assert r.status_code == 400


def test_readiness_and_flush(standin, tmp_path) -> None:
    """Not ready while the server loads, ready once it has: the stand-in stays loading until the test
    creates its --ready-file, and the test waits for the server to say it is ready (no clock involved)."""
    ready_file = tmp_path / "loaded"
    url = standin("sglang", "--ready-file", str(ready_file))
    eng = SGLangEngine(CFG.engine, sweep_facts(CFG), "/m", "standin")

    async def go() -> tuple[bool, bool]:
        async with httpx.AsyncClient() as http:
            first = await eng.probe_ready(http, url)
            ready_file.touch()
            while not (await http.get(f"{url}/standin/stats")).json()["ready"]:
                await asyncio.sleep(0.02)
            ready = await eng.probe_ready(http, url)
            await eng.between_cells(http, url)
            return bool(first), bool(ready)  # a Probe is truthy when ready

    assert asyncio.run(go()) == (False, True)
    assert httpx.get(f"{url}/standin/stats").json()["flushes"] == 1


# -- the whole path through the fake sglang.launch_server ---------------------------------------------
def _procs_on(port: int) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "sglang.launch_server" in cmd and str(port) in cmd:
            out.append(p)
    return out


def test_full_sglang_path_with_startup_version_error(tmp_path: Path, monkeypatch) -> None:
    from specbench.records.rundir import RunDir
    from specbench.runner import RunOptions, run_matrix

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"],
                                                   "max_position_embeddings": 4096}))
    draft = tmp_path / "eagle3"
    draft.mkdir()
    pythonpath = f"{FAKE}{os.pathsep}{REPO}"
    monkeypatch.setenv("PYTHONPATH", pythonpath)  # so preflight finds the fake sglang's version here too
    dist_version.cache_clear()
    port = _port()
    cfg = parse_config({
        "name": "sgl", "model": {"path": str(model), "served_name": "kimi"},
        "engine": {"kind": "sglang", "version": "0.5.23", "port": port, "startup_timeout_s": 20,
                   "stop_timeout_s": 3, "args": ["--tp", "8", "--attention-backend", "triton"],
                   "env": {"PYTHONPATH": pythonpath, "NCCL_PROTO": "LL", "STANDIN_MS_PER_TOKEN": "1"}},
        "variants": [
            {"name": "ar", "drafter": "autoregressive", "baseline": True},
            {"name": "eagle3", "drafter": "eagle3", "params": {"draft_model_path": str(draft), "steps": 3,
                                                                 "topk": 1, "num_draft_tokens": 4}},
            {"name": "broken", "drafter": "eagle3", "env": {"STANDIN_FAIL": "version"},
             "params": {"draft_model_path": str(draft), "steps": 3, "topk": 1, "num_draft_tokens": 4}}],
        "sweep": {"prompts": [{"set": "seed", "categories": ["code"], "per_category": 1}], "output_lens": [32],
                  "concurrency": [1, 2], "repeats": 1, "warmup_requests": 1, "request_timeout_s": 10},
        "output_dir": str(tmp_path / "runs")})
    result = run_matrix(cfg, RunOptions(out=tmp_path / "run"))
    dist_version.cache_clear()
    assert result.status == {"ar": "done", "eagle3": "done", "broken": "failed"}
    rd = RunDir(tmp_path / "run")
    meta = rd.load_meta()
    assert "version" in meta["variants"]["broken"]["reason"] or "exit" in meta["variants"]["broken"]["reason"]
    log = (tmp_path / "run" / "variants" / "broken" / "server.log").read_text()
    assert "compressed-tensors 0.8.1" in log
    recs = [json.loads(line) for line in rd.requests.read_text().splitlines()]
    spec = [r for r in recs if r["variant"] == "eagle3" and not r["warmup"]]
    assert spec and all(r["spec"] and r["spec"]["verify_steps"] for r in spec)
    assert all(r["spec"] is None for r in recs if r["variant"] == "ar")
    fair = json.loads((tmp_path / "run" / "fairness.json").read_text())
    assert fair["pinned"]["--max-running-requests"] == "2"
    assert [d["what"] for d in fair["differences"]] == ["env:STANDIN_FAIL"]  # the only non-drafter difference
    cmd = json.loads((tmp_path / "run" / "variants" / "eagle3" / "command.json").read_text())
    assert "--cuda-graph-max-bs-decode" in cmd["argv"]
    assert _procs_on(port) == []
