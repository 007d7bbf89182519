"""A real API process for worker tests that run real worker processes too.

The API runs as its own process (`python tests/worker/api_process.py serve ...`: uvicorn on
SQLite and a local blob store, with the lease sweeper); the test talks to it over HTTP and
writes what the chain would have confirmed (the escrow row) into the same SQLite file, as
`agent_fixtures.ApiServer` does for the in-thread API.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]


def serve(argv: list[str]) -> None:
    import uvicorn

    from api.app import create_app
    from api.config import ApiConfig
    from api.db import make_engine
    from api.migrate import upgrade_head
    from api.storage import LocalBlobStore

    parser = argparse.ArgumentParser()
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--blobs", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--lease-ttl", type=int, default=30)
    parser.add_argument("--max-body-bytes", type=int, default=8 * 2**20)
    # Oracles whose verdicts release results (tests post one: ApiServer.release).
    parser.add_argument("--oracle-key", action="append", default=[])
    args = parser.parse_args(argv)
    config = ApiConfig(
        database_url=f"sqlite:///{args.db}",
        network="devnet",
        rate_limit_per_minute=1_000_000,
        lease_ttl_s=args.lease_ttl,
        max_body_bytes=args.max_body_bytes,
        sweep_interval_s=1.0,
        oracle_keys=tuple(args.oracle_key),
    )
    engine = make_engine(config.database_url)
    upgrade_head(engine)
    app = create_app(config=config, engine=engine, run_sweeper=True)
    app.state.blob_store = LocalBlobStore(args.blobs)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


@contextmanager
def api_process(
    tmp: Path,
    *,
    lease_ttl_s: int,
    max_body_bytes: int = 8 * 2**20,
    oracle_keys: tuple[str, ...] = (),
) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    """(url, database file, process) of an API started on a free loopback port."""
    from waiting import until  # tests/ is on the path under pytest, not in the child

    from proofnet.processes import free_port

    tmp.mkdir(parents=True, exist_ok=True)
    db, port = tmp / "api.db", free_port()
    log = (tmp / "api.log").open("ab")
    process = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "api_process.py"),
            "serve",
            "--db",
            str(db),
            "--blobs",
            str(tmp / "blobs"),
            "--port",
            str(port),
            "--lease-ttl",
            str(lease_ttl_s),
            "--max-body-bytes",
            str(max_body_bytes),
            *(arg for key in oracle_keys for arg in ("--oracle-key", key)),
        ],
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    try:
        log_file = tmp / "api.log"

        def exited() -> None:
            if process.poll() is not None:
                raise RuntimeError(
                    f"the API exited with {process.returncode}:\n" + log_file.read_text()[-3000:]
                )

        def healthy() -> bool:
            try:
                return httpx.get(f"{url}/api/v1/health", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        # The event: the health route answers (or the process exits: fail at once).
        until(
            "the API to answer its health route",
            healthy,
            alive=exited,
            detail=lambda: log_file.read_text()[-3000:],
        )
        yield url, db, process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve"]:
        sys.exit("usage: api_process.py serve --db FILE --blobs DIR --port N [--lease-ttl S]")
    serve(sys.argv[2:])
