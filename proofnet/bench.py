"""`proofnet bench ...`: each benchmark lives beside the code it measures."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, help="Benchmarks; figures go in docs/benchmarks.md.")


@app.command("devnet")
def bench_devnet(
    payments: int = typer.Option(300, help="simple payments to validate"),
    plutus: int = typer.Option(60, help="Plutus spends to validate"),
    utxos: int = typer.Option(100_000, help="UTxOs for the memory measurement"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON line"),
) -> None:
    """Transactions/s validated (payments, Plutus spends) and memory per 100k UTxOs."""
    from benchmarks.devnet import run_devnet_bench

    run_devnet_bench(payments=payments, plutus=plutus, utxos=utxos, json_out=json_out)


@app.command("settle")
def bench_settle(
    json_out: bool = typer.Option(False, "--json", help="print one JSON line"),
    profile: str = typer.Option(
        "mainnet", "--profile", help="devnet parameter profile: mainnet, preprod or pv10"
    ),
) -> None:
    """Largest batch settlement per transaction (distinct / aggregated) and fee per escrow."""
    from benchmarks.settle import run_settle_bench

    run_settle_bench(json_out=json_out, profile=profile)


@app.command("market")
def bench_market(
    mechanism: list[str] = typer.Option(
        ["fixed", "rate_card", "auction"],
        "--mechanism",
        help="fixed, rate_card, auction, or package.module:Class (repeat)",
    ),
    jobs: int = typer.Option(400, min=1, help="jobs arriving"),
    providers: int = typer.Option(40, min=1, help="providers, one GPU each"),
    hours: float = typer.Option(48.0, min=0.1, help="hours the arrivals spread over"),
    seed: int = typer.Option(7, help="seed of the synthetic market (same seed, same market)"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON line"),
) -> None:
    """Replay one synthetic market under each pricing mechanism: submitter cost, provider
    earnings and profit, utilisation, time to start (docs/pricing.md)."""
    import json

    from benchmarks.market import MarketShape, run_market_bench

    shape = MarketShape(jobs=jobs, providers=providers, hours=hours, seed=seed)
    try:
        report = run_market_bench(mechanism, shape)
    except ValueError as exc:
        typer.secho(f"bench market: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
    if json_out:
        typer.echo(json.dumps(report.as_dict()))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"proofnet bench market ({jobs} jobs, {providers} providers, seed {seed})")
    columns = (
        "completed",
        "unserved",
        "submitter_cost_per_ref_gpu_hour",
        "provider_earnings",
        "provider_profit",
        "utilisation",
    )
    table.add_column("mechanism")
    for c in (*columns, "start mean s", "start p90 s"):
        table.add_column(c, justify="right")
    for name, figures in report.mechanisms.items():
        starts = figures["time_to_start_s"]
        table.add_row(
            name, *(str(figures[c]) for c in columns), str(starts["mean"]), str(starts["p90"])
        )
    Console().print(table)


@app.command("cheat")
def bench_cheat(
    price: float = typer.Option(100.0, help="the reference job's price P (NTX)"),
    cost: float = typer.Option(80.0, help="the provider's own compute cost C of the job (NTX)"),
    bond: float = typer.Option(100.0, help="the provider's bond B (the job's min_bond, NTX)"),
    segments: int = typer.Option(120, min=1, help="segments n of the reference job"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON line"),
    end_to_end: bool = typer.Option(
        False,
        "--end-to-end",
        help="also play the proof cheats through the whole loop on a local devnet (minutes)",
    ),
    snoop_image: str = typer.Option(
        "proofnet/test-numpy:local",
        "--snoop-image",
        help=(
            "with --end-to-end: the local image (python3 + numpy) the snooping job runs in "
            "under Docker (scripts/ci/build-test-image.sh builds it); '' skips that row's loop"
        ),
    ),
) -> None:
    """Each way to cheat against the checks that meet it: caught (by which check), detection
    probability, the cheater's expected value and the verification share (docs/benchmarks.md).
    With --end-to-end, the strategies a cheating provider can play on a CPU devnet worker run
    through the real loop (devnet, API, 3 oracles, one bent worker each): the oracle's
    verdict and whether the provider was paid on chain."""
    import json
    from dataclasses import asdict, replace

    from benchmarks.cheat import run_cheat_bench
    from benchmarks.cheat_model import Terms

    terms = replace(Terms.defaults(), price=price, cost=cost, bond=bond, segments=segments)
    report = run_cheat_bench(terms, end_to_end=end_to_end, snoop_image=snoop_image or None)
    if json_out:
        typer.echo(json.dumps(report.as_dict()))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"proofnet bench cheat ({asdict(terms)})")
    for c in ("strategy", "method", "caught", "paid", "p(caught)", "EV (NTX)", "verification"):
        table.add_column(c)
    table.add_column("by")
    for o in report.outcomes:
        table.add_row(
            o.strategy,
            o.method,
            "yes" if o.caught else "no",
            "-" if o.paid_on_chain is None else ("yes" if o.paid_on_chain else "no"),
            f"{o.detection_probability:.3f}",
            f"{o.expected_value:+.2f}",
            f"{o.verification_share:.1%}",
            o.by,
        )
    Console().print(table)


@app.command("worker")
def bench_worker(
    k: int = typer.Option(100, help="proof-of-training checkpoint interval (steps)"),
    steps: int = typer.Option(1000, help="training steps per measurement"),
    attestations: int = typer.Option(2000, help="attestations to sign and verify"),
    container_runs: int = typer.Option(10, help="container starts to time (0 skips Docker)"),
    image: str = typer.Option("proofnet/test-numpy:local", help="local image for start timing"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON line"),
) -> None:
    """Container start overhead, proof-of-training overhead at k, attestation sign/verify."""
    import json
    from dataclasses import asdict

    from rich.console import Console
    from rich.table import Table

    from benchmarks.pot import run_worker_bench

    report: dict[str, object] = run_worker_bench(k=k, steps=steps, attestations=attestations)
    if container_runs > 0:
        from benchmarks.runtime import bench_worker as container_bench

        start = container_bench(runs=container_runs, image=image)
        report["container_start"] = {
            "storage_driver": start.storage_driver,
            "process_median_s": start.process_median_s,
            "container_median_s": start.container_median_s,
            "overhead_s": start.overhead_s,
            "runs": container_runs,
        }
    if json_out:
        typer.echo(json.dumps(report, default=lambda o: asdict(o)))
        return
    table = Table(title="proofnet bench worker")
    table.add_column("figure")
    table.add_column("value", justify="right")
    pot = report["pot"]
    att = report["attestation"]
    assert isinstance(pot, dict) and isinstance(att, dict)
    for key, value in pot.items():
        table.add_row(f"proof of training: {key}", str(value))
    for key, value in att.items():
        table.add_row(f"attestations: {key}", str(value))
    for key, value in dict(report.get("container_start") or {}).items():  # type: ignore[call-overload]
        table.add_row(f"container start: {key}", str(value))
    Console().print(table)


@app.command("gpu-challenge")
def bench_gpu_challenge(
    n: list[int] = typer.Option([4096, 8192], "--n", help="matrix sizes (repeat)"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON line"),
) -> None:
    """The GPU challenge round outside the product: generating A and B, committing to C,
    the API's check, beside the time the API allows an H100 (docs/benchmarks.md)."""
    import json

    from benchmarks.gpu_challenge import run_gpu_challenge_bench

    rows = run_gpu_challenge_bench(n)
    if json_out:
        typer.echo(json.dumps(rows))
        return
    for row in rows:
        typer.echo(
            f"n={row['n']}: generate A,B {row['generate_s']:.2f} s, commit C "
            f"{row['commit_s']:.2f} s, API check {row['api_check_s']:.2f} s; an H100 at its "
            f"minimum rate computes in {row['h100_compute_s']:.2f} s, allowed "
            f"{row['h100_allowed_s']:.2f} s"
        )


@app.command("handoff")
def bench_handoff(
    size_mb: float = typer.Option(100.0, "--size-mb", help="checkpoint size (MiB)"),
    steps: int = typer.Option(100, help="training steps of the stage that makes it"),
    examples: int = typer.Option(2048, help="examples in the stage's shard"),
    synthetic: bool = typer.Option(
        False, "--synthetic", help="hand off a generated file of --size-mb (no training)"
    ),
    json_out: bool = typer.Option(False, "--json", help="print one JSON line"),
) -> None:
    """Relay stage hand-off (streamed checkpoint upload + download + SHA-256): times, rates,
    peak memory of API and worker, sealing cost; vs the stage's compute."""
    import json

    from rich.console import Console
    from rich.table import Table

    from benchmarks.handoff import run_handoff_bench

    report = run_handoff_bench(size_mb=size_mb, steps=steps, examples=examples, synthetic=synthetic)
    if json_out:
        typer.echo(json.dumps(report))
        return
    table = Table(title=f"proofnet bench handoff ({report['checkpoint_mib']} MiB checkpoint)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in report["stage"].items():
        table.add_row(f"stage: {key}", str(value))
    for key, value in report["handoff"].items():
        table.add_row(f"hand-off: {key}", str(value))
    for key, value in report["memory"].items():
        table.add_row(f"memory: {key}", str(value))
    for key, value in report["sealing"].items():
        table.add_row(f"sealing: {key}", str(value))
    table.add_row("hand-off / compute (%)", str(report["overhead_pct"]))
    Console().print(table)


@app.command("api")
def bench_api(
    postgres_url: str = typer.Option(
        "",
        help="PostgreSQL server URL (default: PROOFNET_TEST_POSTGRES_URL); a fresh database "
        "is created on it and dropped afterwards",
    ),
    users: int = typer.Option(5000, help="users to create"),
    providers: int = typer.Option(1000, help="providers to create"),
    jobs: int = typer.Option(20000, help="jobs to create"),
    workers: int = typer.Option(2, help="uvicorn worker processes"),
    concurrency: int = typer.Option(32, help="keep-alive connections of the load generator"),
    requests: int = typer.Option(30000, help="most requests to send"),
    duration: float = typer.Option(20.0, help="most seconds to send them for"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON line"),
) -> None:
    """Job status and balance reads/s and p50/p95/p99 latency, API on PostgreSQL."""
    import json

    from benchmarks.api import run_api_bench

    report = run_api_bench(
        postgres_url=postgres_url or None,
        users=users,
        providers=providers,
        jobs=jobs,
        workers=workers,
        concurrency=concurrency,
        requests=requests,
        duration_s=duration,
    )
    if json_out:
        typer.echo(json.dumps(report))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"proofnet bench api ({workers} workers, {report['cpu_count']} CPUs)")
    for column in ("endpoint", "requests", "req/s", "p50 ms", "p95 ms", "p99 ms"):
        table.add_column(column, justify="right" if column != "endpoint" else "left")
    rows = {**report["endpoints"], "overall": report["overall"]}
    for name, s in rows.items():
        table.add_row(
            name,
            str(s["requests"]),
            str(s["requests_per_s"]),
            str(s["p50_ms"]),
            str(s["p95_ms"]),
            str(s["p99_ms"]),
        )
    Console().print(table)
    met = "met" if report["target_met"] else "NOT met"
    typer.echo(
        f"target >= 1500 req/s with p99 < 50 ms: {met}; errors: {report['errors'] or 'none'}"
    )


@app.command("oracle")
def bench_oracle(
    n: int = typer.Option(4000, help="attestations to verify per run"),
    processes: list[int] = typer.Option(
        [1, 2], "--processes", "-p", help="verifier processes (repeat for several runs)"
    ),
    batch: int = typer.Option(250, help="attestations per store transaction"),
    latency: bool = typer.Option(
        True, "--latency/--no-latency", help="also time attestation -> confirmed payout"
    ),
    settle_count: int = typer.Option(32, help="attestations to settle for the latency figure"),
    block_time: float = typer.Option(0.5, help="devnet block time (s) for the latency run"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON line"),
) -> None:
    """Attestations/s verified (spot checks excluded) and attestation-to-payout latency."""
    import json

    from rich.console import Console
    from rich.table import Table

    from benchmarks.oracle import run_oracle_verify_bench

    runs = [run_oracle_verify_bench(n, processes=p, batch=batch) for p in processes]
    report: dict[str, object] = {"verify": runs}
    if latency:
        from benchmarks.settlement import run_settlement_bench

        report["settlement_latency"] = run_settlement_bench(
            count=settle_count, block_time_s=block_time
        ).as_dict()
    if json_out:
        typer.echo(json.dumps(report))
        return
    table = Table(title="proofnet bench oracle")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for run in runs:
        label = f"verify, {run['processes']} process(es)"
        table.add_row(f"{label}: attestations/s (wall)", str(run["attestations_per_s"]))
        table.add_row(f"{label}: attestations per CPU-second", str(run["attestations_per_cpu_s"]))
        table.add_row(
            f"{label}: projected on {run['processes']} free core(s)",
            f"{run['projected_per_s_on_processes_cores']} (target {run['target_per_s']})",
        )
        table.add_row(f"{label}: CPU us per attestation", str(run["cpu_us_per_attestation"]))
        shares = run["stage_cpu_share"]
        assert isinstance(shares, dict)
        table.add_row(
            f"{label}: CPU share by stage",
            ", ".join(f"{stage} {share:.0%}" for stage, share in shares.items()),
        )
    settle = report.get("settlement_latency")
    if isinstance(settle, dict):
        for key in ("p50_s", "p95_s", "max_s", "attestations", "batches", "mean_batch_size"):
            table.add_row(f"attestation -> confirmed payout: {key}", str(settle[key]))
        table.add_row(
            "settlement settings",
            f"block {settle['block_time_s']}s, depth {settle['confirmation_depth']}, "
            f"batch {settle['batch_size']}, max wait {settle['max_wait_s']}s",
        )
    Console().print(table)


@app.command("cli")
def bench_cli(
    runs: int = typer.Option(10, help="`proofnet --help` runs to time"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON line"),
) -> None:
    """How fast `proofnet --help` answers: median wall and CPU seconds of fresh interpreters
    (CPU time is what a busy machine does not inflate), and the slowest imports of one run
    (`python -X importtime`)."""
    import json
    import resource
    import statistics
    import subprocess
    import sys
    import time

    argv = [sys.executable, "-m", "proofnet.cli", "--help"]
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        walls.append(time.perf_counter() - began)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    traced = subprocess.run(
        [sys.executable, "-X", "importtime", *argv[1:]], capture_output=True, text=True, check=True
    )
    imports = []  # (cumulative microseconds, module) of top-level imports
    for line in traced.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit() and not parts[2].startswith("  "):
            imports.append((int(parts[1]), parts[2].strip()))
    report = {
        "runs": runs,
        "wall_median_s": round(statistics.median(walls), 3),
        "cpu_median_s": round(statistics.median(cpus), 3),
        "target_s": 1.0,
        "slowest_imports_ms": {m: round(us / 1000, 1) for us, m in sorted(imports)[-5:][::-1]},
    }
    typer.echo(json.dumps(report) if json_out else json.dumps(report, indent=2))
