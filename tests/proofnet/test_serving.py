"""Slow and hostile clients against the served processes (`proofnet.serving`): a real client
on a raw socket trickles a request head or body, or says nothing, and the server answers
408 or closes within its deadline; connections past the cap get 503. Honest twins: a
request that arrives at a normal pace is served, on a kept-alive connection too.

Pacing: the trickling client sends a byte whenever its receive times out (a short socket
timeout); the test itself waits on the server's answer or close, never on a fixed sleep,
with generous bounds (the CI machine is slow)."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from escrow_chain import deployment
from fastapi import FastAPI, Request

from chain.devnet.testing import serve_app
from oracle.keys import write_key
from proofnet.processes import RoleProcess, free_port
from proofnet.serving import HttpLimits

LIMITS = HttpLimits(header_timeout_s=1, body_timeout_s=1, request_timeout_s=3, max_connections=8)
# Generous: what the server must beat by far (its deadlines are 1-3 s).
BOUND_S = 60.0  # a hang bound, far past every deadline; less than any trickle takes


def _app() -> FastAPI:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        return {"bytes": len(await request.body())}

    @app.get("/api/v1/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, int]]:
    with serve_app(_app(), limits=LIMITS) as url:
        yield url, int(url.rsplit(":", 1)[1])


def trickle(port: int, data: bytes, *, pace_s: float = 0.2) -> tuple[bytes, int]:
    """Send `data` one byte per `pace_s` until the server answers or closes; returns what
    it said (b"" if it only closed) and how many bytes it had not yet been sent then (more
    than none: the server's deadline, not the end of the data, ended it). Fails if it
    never does: `data` takes longer than BOUND_S to trickle."""
    assert len(data) * pace_s > BOUND_S
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(pace_s)
        answer = b""
        sent = 0
        while time.monotonic() - started < BOUND_S:
            if sent < len(data):
                try:
                    s.send(data[sent : sent + 1])
                    sent += 1
                except OSError:
                    break
            try:
                chunk = s.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                break
            answer += chunk
        else:
            pytest.fail(f"the server kept a trickling connection open for {BOUND_S}s")
        return answer, len(data) - sent


def silent(port: int) -> tuple[bytes, float]:
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(BOUND_S)
        return s.recv(4096), time.monotonic() - started


SLOW_HEAD = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 400
SLOW_BODY = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"


def test_a_trickled_head_gets_408(served: tuple[str, int]) -> None:
    answer, unsent = trickle(served[1], SLOW_HEAD)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
    assert unsent > 0


def test_a_connection_that_says_nothing_gets_408(served: tuple[str, int]) -> None:
    answer, _ = silent(served[1])
    assert answer.startswith(b"HTTP/1.1 408"), answer[:80]


def test_a_trickled_body_is_cut_off(served: tuple[str, int]) -> None:
    """Each byte comes before the idle deadline; the request deadline still ends it."""
    answer, unsent = trickle(served[1], SLOW_BODY + b"x" * 1000)
    assert b"200 OK" not in answer
    assert unsent > 0  # cut off mid-body by the server, not finished by the client


def test_connections_past_the_cap_get_503(served: tuple[str, int]) -> None:
    with contextlib.ExitStack() as stack:
        held = [
            stack.enter_context(socket.create_connection(("127.0.0.1", served[1])))
            for _ in range(LIMITS.max_connections)
        ]
        extra = stack.enter_context(socket.create_connection(("127.0.0.1", served[1])))
        extra.settimeout(BOUND_S)
        assert extra.recv(4096).startswith(b"HTTP/1.1 503")
        assert len(held) == LIMITS.max_connections


def test_honest_clients_are_served(served: tuple[str, int]) -> None:
    url, port = served
    with httpx.Client(base_url=url) as client:  # one kept-alive connection
        for _ in range(3):
            assert client.post("/echo", content=b"x" * 50_000).json() == {"bytes": 50_000}
    # A body sent in pieces, each well within the idle deadline, is served.
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(BOUND_S)
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nabc")
        s.sendall(b"def")
        assert b'{"bytes":6}' in s.recv(4096)


# --- the real served processes ---------------------------------------------------------------


def _process(tmp_path: Path, name: str, argv: list[str], env: dict[str, str]) -> RoleProcess:
    deadlines = {
        "PROOFNET_HTTP_HEADER_TIMEOUT_S": "1",
        "PROOFNET_HTTP_BODY_TIMEOUT_S": "1",
        "PROOFNET_HTTP_REQUEST_TIMEOUT_S": "3",
    }
    return RoleProcess(
        name, argv, tmp_path / f"{name}.log", env={**deadlines, **env}, cwd=tmp_path / name
    ).start()


@pytest.mark.slow
@pytest.mark.parametrize("role", ["api", "oracle", "devnet"])
def test_every_served_role_times_out_slow_clients(role: str, tmp_path: Path) -> None:
    port = free_port()
    env = {"PROOFNET_DATA_DIR": str(tmp_path / "data")}
    if role == "api":
        env["PROOFNET_DATABASE_URL"] = f"sqlite:///{tmp_path / 'api.db'}"
        argv = ["api", "serve", "--host", "127.0.0.1", "--port", str(port)]
        health = "/api/v1/health"
    elif role == "oracle":
        key = write_key(tmp_path / "oracle.skey")
        deployment().save(tmp_path / "deployment.json")
        env |= {
            "PROOFNET_DATABASE_URL": f"sqlite:///{tmp_path / 'oracle.db'}",
            "PROOFNET_ORACLE_KEY_FILE": str(key.path),
            "PROOFNET_DEPLOYMENT_FILE": str(tmp_path / "deployment.json"),
        }
        argv = ["oracle", "serve", "--host", "127.0.0.1", "--port", str(port)]
        health = "/api/v1/health"
    else:
        argv = ["devnet", "up", "--data-dir", str(tmp_path / "chain"), "--port", str(port)]
        argv += ["--host", "127.0.0.1"]
        health = "/api/v0/health"
    process = _process(tmp_path, role, argv, env)
    try:
        process.wait_healthy(f"http://127.0.0.1:{port}{health}", timeout=120)
        answer, unsent = trickle(port, SLOW_HEAD)
        assert answer.startswith(b"HTTP/1.1 408"), (answer[:80], process.tail())
        assert unsent > 0
        assert silent(port)[0].startswith(b"HTTP/1.1 408")
        # The honest twin, after the slow clients: the process still serves.
        assert httpx.get(f"http://127.0.0.1:{port}{health}", timeout=10).status_code == 200
    finally:
        process.stop()
