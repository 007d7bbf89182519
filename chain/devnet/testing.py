"""Run a devnet inside a test (or a script): the public way for any suite to get a chain.

    from chain.devnet.testing import running_devnet

    def test_something(tmp_path):
        with running_devnet(tmp_path) as devnet:
            context = devnet.chain_context()          # pycardano BlockFrostChainContext
            devnet.fund(address, lovelace=50_000_000)  # faucet, through the admin API
            devnet.wait_for_tx(tx_hash)                # until it is in a block

The server runs in a background thread (uvicorn on a free port of 127.0.0.1) over a real
`chain.devnet.ledger.Ledger` in `tmp_path`, with the block producer ticking every
`block_time` seconds. Leaving the `with` block stops both and closes the ledger, so the same
data dir can be opened again to test a restart.

pytest users can instead take the `devnet` fixture from `tests/chain/devnet/devnet_fixtures.py`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_delay, wait_fixed

from chain.devnet.interface import DevnetLedger
from proofnet.serving import HttpLimits, uvicorn_config


class DevnetStartError(RuntimeError):
    """The devnet server did not come up."""


@contextlib.contextmanager
def serve_app(
    app: FastAPI,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    startup_timeout: float = 10.0,
    limits: HttpLimits | None = None,
) -> Iterator[str]:
    """Serve `app` with uvicorn in a daemon thread, under `limits` as the roles serve
    (`proofnet.serving`), on `port` (0: a free one); yield its root URL (`http://host:port`)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    port = sock.getsockname()[1]
    config = uvicorn_config(
        app,
        host=host,
        port=port,
        limits=limits or HttpLimits(),
        log_level="warning",
        lifespan="off",
        access_log=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"devnet-http-{port}", daemon=True
    )
    thread.start()

    def settled() -> bool:
        return bool(server.started) or not thread.is_alive()  # a dead thread never starts

    Retrying(
        stop=stop_after_delay(startup_timeout),
        wait=wait_fixed(0.01),
        retry=retry_if_result(lambda done: not done),
        retry_error_callback=lambda _state: False,
    )(settled)
    if not server.started:
        server.should_exit = True
        sock.close()
        raise DevnetStartError(f"uvicorn did not start on {host}:{port}")
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@dataclass
class RunningDevnet:
    """A devnet serving over HTTP. `url` ends in `/api/v0` (the Blockfrost base)."""

    url: str
    ledger_data_dir: Path
    ledger: DevnetLedger
    admin_token: str | None = None
    _client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=30), repr=False)

    @property
    def root_url(self) -> str:
        """What `BlockFrostChainContext(base_url=...)` wants: the URL without `/v0`."""
        return self.url[: -len("/v0")]

    def chain_context(self) -> Any:
        """A pycardano `BlockFrostChainContext` talking to this devnet."""
        from pycardano import BlockFrostChainContext

        return BlockFrostChainContext(project_id="devnet", base_url=self.root_url)

    def admin(self, path: str, payload: dict[str, Any] | None = None) -> Any:
        headers = {"Authorization": f"Bearer {self.admin_token}"} if self.admin_token else {}
        response = self._client.post(
            f"{self.url}/admin/{path}", json=payload or {}, headers=headers
        )
        if response.status_code != 200:
            raise RuntimeError(f"admin/{path} failed: {response.status_code} {response.text}")
        return response.json()

    def fund(self, address: str, lovelace: int = 0, assets: dict[str, int] | None = None) -> str:
        """Pay `address` from the faucet (assets: name hex -> qty, under the faucet policy)."""
        body = self.admin(
            "fund", {"address": str(address), "lovelace": lovelace, "assets": assets or {}}
        )
        return str(body["tx_hash"])

    def admin_status(self) -> dict[str, Any]:
        """Tip, mempool size, paused flag, faucet address and policy id."""
        response = self._client.get(f"{self.url}/admin/status")
        response.raise_for_status()
        return dict(response.json())

    def produce_block(self) -> dict[str, Any] | None:
        block = self.admin("produce-block")["block"]
        return block if block is None else dict(block)

    def wait_for_tx(self, tx_hash: str, timeout: float = 30.0) -> dict[str, Any]:
        """Block until `tx_hash` is confirmed; return its Blockfrost `/txs/{hash}` JSON."""

        def confirmed() -> dict[str, Any] | None:
            response = self._client.get(f"{self.url}/txs/{tx_hash}")
            return dict(response.json()) if response.status_code == 200 else None

        def timed_out(_state: RetryCallState) -> dict[str, Any]:
            raise TimeoutError(f"transaction {tx_hash} not confirmed within {timeout}s")

        found = Retrying(
            stop=stop_after_delay(timeout),
            wait=wait_fixed(0.05),
            retry=retry_if_result(lambda got: got is None),
            retry_error_callback=timed_out,
        )(confirmed)
        assert found is not None  # the retry ends only on an answer, or raises
        return found

    def close(self) -> None:
        self._client.close()


@contextlib.contextmanager
def running_devnet(
    tmp_path: Path,
    *,
    block_time: float = 0.2,
    enable_faults: bool = True,
    admin_token: str | None = None,
    data_dir: Path | None = None,
    profile: str | None = None,
) -> Iterator[RunningDevnet]:
    """A real Ledger in `data_dir` (default `tmp_path / "devnet"`), served on a free port,
    with the parameters of `profile` (default: today's mainnet)."""
    from chain.devnet.ledger import Ledger
    from chain.devnet.profiles import profile_params
    from chain.devnet.server import create_app

    directory = data_dir or Path(tmp_path) / "devnet"
    directory.mkdir(parents=True, exist_ok=True)
    params = profile_params(profile) if profile else None
    ledger = Ledger.open(directory, params=params, enable_faults=enable_faults)
    try:
        app = create_app(ledger, enable_faults=enable_faults, admin_token=admin_token)
        with block_producer(ledger, block_time), serve_app(app) as root:
            devnet = RunningDevnet(
                url=f"{root}/api/v0",
                ledger_data_dir=directory,
                ledger=ledger,
                admin_token=admin_token,
            )
            try:
                yield devnet
            finally:
                devnet.close()
    finally:
        ledger.close()


@contextlib.contextmanager
def block_producer(ledger: DevnetLedger, block_time: float) -> Iterator[Any]:
    """The ledger's block producer thread, running for the duration of the `with` block."""
    from chain.devnet.producer import BlockProducer

    producer = BlockProducer(ledger, block_time)
    producer.start()
    try:
        yield producer
    finally:
        producer.stop()
