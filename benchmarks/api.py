"""`proofnet bench api`: the API on PostgreSQL under load from a second process.

A fresh database is created on the server (PROOFNET_TEST_POSTGRES_URL or `postgres_url`),
migrated, filled with users, providers, jobs, tokens and payouts, and vacuumed/analyzed (as
autovacuum would soon after a bulk load); uvicorn serves the app with `workers` processes
(uvloop + httptools, no access log); a separate load-generator process (raw asyncio HTTP/1.1
over `concurrency` keep-alive loopback connections, closed loop: each connection sends its
next request when the last response is complete, and latency runs from send to complete)
reads job statuses and balances for a bounded number of requests or seconds, and reports
requests/s and p50/p95/p99 latency per endpoint. The database is dropped afterwards.

Other work on the machine competes for the same cores, so the report also gives the 1-minute
load average before and after, and the CPU time per request of the API's processes, of the
PostgreSQL backends serving them and of the load generator over the measured window: those
do not depend on how busy the machine was.

Balance reads make no chain call per request: chain and oracle lookups are cached per
address for a short TTL (`api.services.balances.CachedLookups`); in this benchmark no chain
backend is running, so every lookup is a cached failure and the figures measure the API and
the database, not the chain.

The app is served as in production: both reads go through the lean path (api.fastpath), and
each process keeps job status bodies while its change feed listens (api.reads._status_cache). The
load picks a client, then one of its jobs, uniformly: some 11,000 (client, job) pairs, each
read about once per process per run, so the status cache rarely hits here and the status
figures are essentially those of the uncached read (one query). Pollers that ask about the
same job again and again, as clients do, are served from it.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
STATUS = "job_status"
BALANCE = "balance"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spec(seed: int) -> dict[str, Any]:
    return {
        "version": 1,
        "model": {"repo_url": "https://github.com/example/train", "commit": "a" * 40},
        "framework": "pytorch",
        "image": "pytorch/pytorch@sha256:" + "b" * 64,
        "commands": [["python", "train.py", "--epochs", "1"]],
        "resources": {
            "gpus": 1,
            "gpu_memory_mb": 16384,
            "cpus": 4,
            "ram_mb": 16000,
            "disk_mb": 50000,
            "max_duration_s": 3600,
        },
        "data": [],
        "results": [],
        "pricing": {"kind": "fixed", "amount": 1_000_000},
        "seed": seed,
        "egress": False,
        "proof": {"steps_per_checkpoint": 100, "spot_checks": 3, "tolerance_ppm": 0},
    }


def seed_database(
    url: str, *, users: int, providers: int, jobs: int, clients: int
) -> dict[str, Any]:
    """Fill a migrated database; returns the tokens, job ids and addresses the load uses."""
    from pycardano import Address, Network, PaymentSigningKey
    from sqlalchemy import insert

    from api.db import make_engine
    from api.models import ApiToken, ChainMovement, Job, Provider, ProviderGpu, User
    from api.services.tokens import secret_hash

    rng = random.Random(7)
    now = datetime.now(UTC)
    engine = make_engine(url)
    try:
        addresses = []
        hashes = []
        for _ in range(users):
            vkh = PaymentSigningKey.generate().to_verification_key().hash()
            addresses.append(str(Address(vkh, network=Network.TESTNET)))
            hashes.append(vkh.payload.hex())
        with engine.begin() as conn:
            conn.execute(
                insert(User),
                [
                    {
                        "address": a,
                        "payment_key_hash": h,
                        "is_senior": False,
                        "is_approved": True,
                        "created_at": now,
                        "approved_at": now,
                    }
                    for a, h in zip(addresses, hashes, strict=True)
                ],
            )
            conn.execute(
                insert(Provider),
                [
                    {
                        "worker_key": f"{i:064x}",
                        "key_id": f"{i:056x}",
                        # Providers are paid to some of the users' wallets.
                        "payout_address": addresses[i % users],
                        "binding": {},
                        "capabilities": {},
                        "registered_at": now,
                        "last_heartbeat_at": now - timedelta(seconds=rng.choice((5, 3600))),
                    }
                    for i in range(providers)
                ],
            )
            conn.execute(
                insert(ProviderGpu),
                [
                    {
                        "provider_id": p + 1,
                        "index": g,
                        "uuid": f"GPU-{p}-{g}",
                        "model": rng.choice(("NVIDIA A100 80GB", "NVIDIA L4", "NVIDIA H100")),
                        "memory_mb": rng.choice((24576, 81920)),
                    }
                    for p in range(providers)
                    for g in range(rng.randint(1, 4))
                ],
            )
            client_ids = list(range(1, clients + 1))
            tokens = [uuid.uuid4().hex + uuid.uuid4().hex for _ in client_ids]
            conn.execute(
                insert(ApiToken),
                [
                    {
                        "token_hash": secret_hash(t),
                        "user_id": uid,
                        "created_at": now,
                        "expires_at": now + timedelta(days=1),
                    }
                    for uid, t in zip(client_ids, tokens, strict=True)
                ],
            )
            rows = []
            owned: dict[int, list[str]] = {}
            for n in range(jobs):
                owner = rng.choice(client_ids) if n % 2 == 0 else rng.randint(1, users)
                spec = _spec(n)
                job_id = uuid.UUID(int=rng.getrandbits(128)).hex + uuid.uuid4().hex
                status = rng.choices(("completed", "queued", "failed"), (75, 20, 5))[0]
                created = now - timedelta(seconds=jobs - n)
                rows.append(
                    {
                        "job_id": job_id,
                        "owner_id": owner,
                        "spec": spec,
                        "gpu_count": 1,
                        "gpu_memory_mb": 16384,
                        "status": status,
                        "attempts": 1 if status != "queued" else 0,
                        "failures": 1 if status == "failed" else 0,
                        "max_attempts": 3,
                        "progress": 1.0 if status == "completed" else 0.0,
                        "progress_message": "",
                        "last_error": "",
                        "created_at": created,
                        "updated_at": created,
                        "finished_at": created if status != "queued" else None,
                        "version": 1,
                    }
                )
                if owner <= clients:
                    owned.setdefault(owner, []).append(job_id)
            conn.execute(insert(Job), rows)
            conn.execute(
                insert(ChainMovement),
                [
                    {
                        "deployment": "00" * 28,
                        "kind": "payout",
                        "action": "settle",
                        "escrow_tx_id": f"{n:064x}",
                        "escrow_index": 0,
                        "job_id": f"{rng.randint(1, jobs):064x}",
                        "tx_hash": f"{n:064x}",
                        "tx_index": 0,
                        "output_index": 0,
                        "address": addresses[rng.randrange(clients)],
                        "lovelace": 1_500_000,
                        "ntx": rng.randint(1, 10**6),
                        "block_height": n,
                        "block_hash": f"{n:064x}",
                        "slot": n,
                        "block_time": now,
                        "recorded_at": now,
                    }
                    for n in range(min(jobs, 5 * clients))
                ],
            )
    finally:
        engine.dispose()
    return {
        "clients": [
            {"token": tokens[uid - 1], "address": addresses[uid - 1], "jobs": owned.get(uid, [])}
            for uid in client_ids
            if owned.get(uid)
        ]
    }


# --- the load generator (runs in its own process) -------------------------------------------


async def _connection(
    port: int,
    plan: list[tuple[str, bytes]],
    deadline: float,
    results: dict[str, list[float]],
    errors: dict[str, int],
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for name, request in plan:
            if time.perf_counter() > deadline:
                return
            start = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            elapsed = time.perf_counter() - start
            if status == 200:
                results[name].append(elapsed)
            else:
                errors[f"{name}:{status}"] = errors.get(f"{name}:{status}", 0) + 1
    finally:
        writer.close()


def _request(path: str, token: str) -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        "Accept: application/json\r\n\r\n"
    ).encode()


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes so far (Linux /proc; 0 for any that is gone)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def _process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (uvicorn's master and its workers)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return found


def _postgres_backends(url: str, database: str) -> list[int]:
    """PIDs of the server's backends connected to `database` (the API's pooled ones)."""
    from sqlalchemy import text

    from api.db import make_engine

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT pid FROM pg_stat_activity WHERE datname = :d"), {"d": database}
            )
            return [int(r[0]) for r in rows]
    except Exception:  # CPU accounting is a nicety: never fail the run over it
        return []
    finally:
        engine.dispose()


async def _load(config: dict[str, Any]) -> dict[str, Any]:
    rng = random.Random(11)
    clients = config["clients"]
    per_connection = config["requests"] // config["concurrency"]
    results: dict[str, list[float]] = {STATUS: [], BALANCE: []}
    errors: dict[str, int] = {}
    plans = []
    for _ in range(config["concurrency"]):
        plan = []
        for _ in range(per_connection):
            c = rng.choice(clients)
            if rng.random() < config["balance_share"]:
                plan.append((BALANCE, _request(f"/api/v1/balances/{c['address']}", c["token"])))
            else:
                job = rng.choice(c["jobs"])
                plan.append((STATUS, _request(f"/api/v1/jobs/{job}/status", c["token"])))
        plans.append(plan)
    # Warm up: every worker process opens its pool and caches before the clock starts.
    warm_deadline = time.perf_counter() + 30
    await asyncio.gather(
        *(
            _connection(config["port"], p[:20], warm_deadline, {STATUS: [], BALANCE: []}, {})
            for p in plans
        )
    )
    # CPU per request, whatever else the machine runs: the API's processes, the database
    # backends serving it (same host), and this process, over the measured window only.
    server = _process_tree(config["server_pid"]) if config.get("server_pid") else []
    backends = _postgres_backends(config["admin_url"], config["database"]) if server else []
    cpu0 = (_cpu_seconds(server), _cpu_seconds(backends), time.process_time())
    start = time.perf_counter()
    deadline = start + config["duration_s"]
    await asyncio.gather(
        *(_connection(config["port"], p, deadline, results, errors) for p in plans)
    )
    wall = time.perf_counter() - start
    # A backend that connected during the window (a read thread's first connection) is
    # counted from its start.
    known = set(backends)
    later = [
        pid
        for pid in (_postgres_backends(config["admin_url"], config["database"]) if server else [])
        if pid not in known
    ]
    cpu = {
        "server_s": _cpu_seconds(server) - cpu0[0],
        "postgres_s": _cpu_seconds(backends) - cpu0[1] + _cpu_seconds(later),
        "load_generator_s": time.process_time() - cpu0[2],
    }
    return {"wall_s": wall, "latencies": results, "errors": errors, "cpu": cpu}


def _load_main() -> None:
    """The load generator's process: its configuration on stdin, its results written to
    the file `config["out"]` names."""
    config = json.loads(sys.stdin.read())
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    result = asyncio.run(_load(config))
    with open(config["out"], "w") as f:
        json.dump(result, f)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(latencies: list[float], wall_s: float) -> dict[str, float]:
    return {
        "requests": len(latencies),
        "requests_per_s": round(len(latencies) / wall_s, 1) if wall_s else 0.0,
        "p50_ms": round(_percentile(latencies, 0.50) * 1000, 2),
        "p95_ms": round(_percentile(latencies, 0.95) * 1000, 2),
        "p99_ms": round(_percentile(latencies, 0.99) * 1000, 2),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 2) if latencies else float("nan"),
    }


# --- the server -------------------------------------------------------------------------------


def bench_app() -> Any:
    """uvicorn factory: the app as `proofnet api serve` builds it, from the environment."""
    from api.app import create_app

    return create_app()


def _wait_ready(port: int, process: subprocess.Popen[bytes], timeout: float = 300.0) -> None:
    # A bound on a hang, not a budget: on a loaded machine several workers take a while.
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {process.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the API did not come up in time")


def run_api_bench(
    *,
    postgres_url: str | None = None,
    users: int = 5000,
    providers: int = 1000,
    jobs: int = 20000,
    clients: int = 500,
    workers: int = 2,
    concurrency: int = 32,
    requests: int = 30000,
    duration_s: float = 20.0,
    balance_share: float = 0.3,
) -> dict[str, Any]:
    """Run the benchmark; returns the per-endpoint figures and whether the target was met."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from api.db import make_engine
    from api.migrate import upgrade_head

    load_before = os.getloadavg()[0]
    admin_url = make_url(
        postgres_url or os.environ.get("PROOFNET_TEST_POSTGRES_URL") or DEFAULT_POSTGRES_URL
    )
    if admin_url.get_backend_name() != "postgresql":
        raise ValueError("the API benchmark runs on PostgreSQL; give a postgresql:// URL")
    name = f"proofnet_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = admin_url.set(database=name).render_as_string(hide_password=False)
    server: subprocess.Popen[bytes] | None = None
    try:
        engine = make_engine(url)
        upgrade_head(engine)
        engine.dispose()
        t0 = time.perf_counter()
        data = seed_database(url, users=users, providers=providers, jobs=jobs, clients=clients)
        # What autovacuum does to a table soon after a bulk load: statistics for the
        # planner, and a visibility map so the queue-position count is index-only.
        vacuum = create_engine(make_url(url), isolation_level="AUTOCOMMIT")
        try:
            with vacuum.connect() as conn:
                conn.execute(text("VACUUM ANALYZE"))
        finally:
            vacuum.dispose()
        seed_s = time.perf_counter() - t0
        port = _free_port()
        env = dict(
            os.environ,
            PROOFNET_DATABASE_URL=url,
            PROOFNET_API_RATE_LIMIT_PER_MINUTE=str(10**9),
            # No chain backend here: lookups fail fast and the failure is cached.
            PROOFNET_DEVNET_URL="http://127.0.0.1:9/api/v0",
            PROOFNET_ORACLE_URL="",
        )
        server = subprocess.Popen(
            [
                sys.executable, "-m", "uvicorn", "benchmarks.api:bench_app", "--factory",
                "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
                "--loop", "uvloop", "--http", "httptools", "--no-access-log",
                "--log-level", "warning",
            ],
            env=env,
        )  # fmt: skip
        _wait_ready(port, server)
        load_config = {
            "port": port,
            "clients": data["clients"],
            "concurrency": concurrency,
            "requests": requests,
            "duration_s": duration_s,
            "balance_share": balance_share,
            "server_pid": server.pid,
            "admin_url": admin_url.render_as_string(hide_password=False),
            "database": name,
        }
        with tempfile.TemporaryDirectory(prefix="proofnet-bench-") as tmp:
            load_config["out"] = os.path.join(tmp, "load.json")
            loader = subprocess.run(
                [sys.executable, "-c", "from benchmarks.api import _load_main; _load_main()"],
                input=json.dumps(load_config).encode(),
                capture_output=True,
                timeout=duration_s + 120,
                check=False,
            )
            if loader.returncode != 0:
                raise RuntimeError(f"load generator failed: {loader.stderr.decode()[-2000:]}")
            with open(load_config["out"]) as f:
                out = json.load(f)
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
        with admin.connect() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": name},
            )
            # FORCE: a pool the server left behind may reconnect between the two statements.
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    wall = float(out["wall_s"])
    both = out["latencies"][STATUS] + out["latencies"][BALANCE]
    overall = _summary(both, wall)
    report: dict[str, Any] = {
        "database": "postgresql",
        # The scratch database the run created and dropped, so a caller can check it is gone.
        "scratch_database": name,
        "data": {"users": users, "providers": providers, "jobs": jobs, "clients": clients},
        "seed_s": round(seed_s, 1),
        "server": {"workers": workers, "loop": "uvloop", "http": "httptools"},
        "load": {"concurrency": concurrency, "wall_s": round(wall, 2), "process": "separate"},
        "endpoints": {
            STATUS: _summary(out["latencies"][STATUS], wall),
            BALANCE: _summary(out["latencies"][BALANCE], wall),
        },
        "overall": overall,
        "errors": out["errors"],
        "cpu_count": os.cpu_count(),
        # Other work on the machine competes for the same cores: read the figures with it.
        # Before: what else ran when the benchmark began; after: that plus the benchmark.
        "load_average_1m_before": round(load_before, 2),
        "load_average_1m": round(os.getloadavg()[0], 2),
        # CPU milliseconds per measured request: independent of how busy the machine was.
        "cpu_ms_per_request": {
            key.removesuffix("_s"): round(seconds * 1000 / len(both), 3) if both else None
            for key, seconds in out.get("cpu", {}).items()
        },
        "target": {"requests_per_s": 1500, "p99_ms": 50},
    }
    report["target_met"] = (
        overall["requests_per_s"] >= 1500 and overall["p99_ms"] < 50 and not out["errors"]
    )
    return report
