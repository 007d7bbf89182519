"""`proofnet worker ...`: onboarding a provider's machine.

`onboard` inventories the GPUs (NVML), checks that containers get them, times and self-checks
the matrix-multiply challenge on each, creates or loads the worker key, signs the payout
binding, and either registers with the API (`--api-url`) or writes the registration to the
work dir. The worker talks to the API only over HTTP; it imports nothing from `api/`.
"""

from __future__ import annotations

import json
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

# The request-signing scheme the API checks; re-exported here for callers of the old name.
from proofnet.messages.worker_auth import request_target, sign_request_headers
from proofnet.redaction import redact_credentials
from worker.bid_cli import auctions, bid, reveal
from worker.rate_card_cli import rate_card
from worker.status_cli import status

if TYPE_CHECKING:
    from worker.agent import AgentConfig

app = typer.Typer(no_args_is_help=True, help="Run a proofnet worker on this machine.")


@app.callback()
def _worker() -> None:
    """Run a proofnet worker on this machine."""
    # A callback keeps `onboard` a sub-command (Typer collapses single-command apps), so the
    # lead can mount this app as `proofnet worker` and later commands slot in beside it.


_REVEALED_ROWS_PER_CHALLENGE = 2
_DEFAULT_N_GPU = 4096
_DEFAULT_N_CPU = 512


class OnboardingError(Exception):
    """Onboarding cannot continue; the message says what to do."""


@dataclass(frozen=True)
class OnboardOptions:
    api_url: str | None
    payout_address: str | None
    key_file: Path
    work_dir: Path
    network: str
    skip_challenge: bool
    skip_runtime_check: bool
    challenge_n: int | None
    dtype: str
    gpu_image: str
    timeout_s: float = 30.0


@dataclass(frozen=True)
class OnboardOutcome:
    registration: Any  # ProviderRegistration
    key_id: str
    key_file: Path
    key_created: bool
    report_path: Path
    registered: bool
    api_response: Any
    problems: tuple[str, ...]  # reasons this machine is not ready; empty when it is

    @property
    def ok(self) -> bool:
        return not self.problems


# --- signed HTTP ---------------------------------------------------------------------------


def _signed_post(client: Any, url: str, body: bytes, key: Any, network: str) -> Any:
    import httpx

    target = httpx.URL(url)
    path = request_target(target.raw_path.decode("ascii"))  # as the API reconstructs it
    headers = sign_request_headers(
        key.signing_key, network=network, method="POST", path=path, body=body
    )
    headers["Content-Type"] = "application/json"
    try:
        response = client.post(target, content=body, headers=headers)
    except httpx.TransportError as e:
        raise OnboardingError(
            f"cannot reach the proofnet API at {target.scheme}://{target.netloc.decode()}: {e} "
            "(check --api-url, the network, and that the API is running)"
        ) from e
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail", response.text)
        except (ValueError, AttributeError):
            detail = response.text
        raise OnboardingError(f"the API refused {path}: HTTP {response.status_code}: {detail}")
    try:
        return response.json()
    except ValueError as e:
        raise OnboardingError(f"the API answered {path} with something that is not JSON") from e


# --- onboarding ----------------------------------------------------------------------------


def run_onboarding(
    opts: OnboardOptions,
    *,
    nvml: Any = None,
    docker_client: Any = None,
    gpu_compute: Any = None,
) -> OnboardOutcome:
    """Everything `onboard` does except printing. `nvml`, `docker_client` and `gpu_compute`
    (how a GPU computes the API's challenge; default: on that GPU) are for tests."""
    from proofnet import __version__
    from proofnet.messages.binding import NETWORKS, BindingError
    from proofnet.messages.registration import (
        REGISTRATION_CHALLENGE_PATH,
        REGISTRATION_PATH,
        GpuDetail,
        GpuRegistration,
        HostReport,
        ProviderRegistration,
        RegistrationChallenge,
        RuntimeReport,
        WorkerCapabilities,
    )
    from worker.gpu_runtime_check import RuntimeCheck, check_gpu_runtime
    from worker.identity import IdentityError, bind_payout_address, load_or_create_key
    from worker.inventory import InventoryError, collect_inventory

    if opts.network not in NETWORKS:
        raise OnboardingError(f"unknown network {opts.network!r}; use one of {', '.join(NETWORKS)}")
    if opts.api_url and not opts.payout_address:
        raise OnboardingError("registering with the API needs --payout-address")
    problems: list[str] = []
    try:
        inventory = collect_inventory(nvml, work_dir=opts.work_dir)
    except InventoryError as e:
        raise OnboardingError(f"GPU inventory failed: {e}") from e

    uuids = [g.uuid for g in inventory.gpus]
    if inventory.cpu_only:
        runtime = RuntimeCheck("skipped", "skipped", "CPU-only: no GPUs to give to containers")
    elif opts.skip_runtime_check:
        runtime = RuntimeCheck("skipped", "skipped", "skipped by --skip-runtime-check")
    else:
        runtime = check_gpu_runtime(uuids, image=opts.gpu_image, client=docker_client)
        if not runtime.ok:
            problems.append(f"container GPU runtime: {runtime.diagnosis}; fix: {runtime.fix}")

    try:
        key, created = load_or_create_key(opts.key_file)
    except IdentityError as e:
        raise OnboardingError(str(e)) from e

    client = None
    api = (opts.api_url or "").rstrip("/")
    if api:
        import httpx

        client = httpx.Client(timeout=opts.timeout_s)
    try:
        if client is not None:
            answer = _signed_post(
                client,
                api + REGISTRATION_CHALLENGE_PATH,
                b"",
                key,
                opts.network,
            )
            try:
                issued = RegistrationChallenge.model_validate(answer)
            except ValueError as e:
                raise OnboardingError(f"the API's challenge answer is malformed: {e}") from e
            if issued.network != opts.network:
                raise OnboardingError(
                    f"the API runs on {issued.network} but this worker is set to {opts.network} "
                    "(set PROOFNET_NETWORK or --network)"
                )
            nonce, seed_source = issued.nonce, "api-nonce"
        else:
            nonce, seed_source = secrets.token_hex(32), "local-nonce"

        challenges = (
            [] if opts.skip_challenge else _run_challenges(opts, inventory, nonce, problems)
        )

        binding = None
        if opts.payout_address:
            try:
                binding = bind_payout_address(key, opts.payout_address, opts.network, nonce)
            except BindingError as e:
                raise OnboardingError(f"cannot bind the payout address: {e}") from e

        host = inventory.host
        registration = ProviderRegistration(
            binding=binding,
            gpus=[
                GpuRegistration(
                    index=g.index,
                    uuid=g.uuid,
                    name=g.name,
                    memory_mb=max(1, g.memory_total_bytes // 2**20),
                )
                for g in inventory.gpus
            ],
            capabilities=WorkerCapabilities(
                worker_version=__version__,
                cpu_only=inventory.cpu_only,
                cpu_only_reason=inventory.cpu_only_reason,
                driver_version=inventory.driver_version,
                cuda_version=inventory.cuda_version,
                gpus=[
                    GpuDetail(
                        index=g.index,
                        uuid=g.uuid,
                        compute_capability=f"{g.compute_capability[0]}.{g.compute_capability[1]}",
                        pci_bus_id=g.pci_bus_id,
                        memory_total_bytes=g.memory_total_bytes,
                        power_limit_w=g.power_limit_w,
                    )
                    for g in inventory.gpus
                ],
                host=HostReport(
                    os=host.os,
                    kernel=host.kernel,
                    arch=host.arch,
                    cpu_model=host.cpu_model,
                    cpu_count=host.cpu_count,
                    ram_total_bytes=host.ram_total_bytes,
                    disk_free_bytes=host.disk_free_bytes,
                    python=host.python,
                ),
                runtime_check=RuntimeReport(
                    status=runtime.status,
                    problem=runtime.problem,
                    diagnosis=runtime.diagnosis,
                    fix=runtime.fix,
                ),
                challenge_seed_source=seed_source,  # type: ignore[arg-type]
                challenges=challenges,
            ),
        )
        opts.work_dir.mkdir(parents=True, exist_ok=True)
        report_path = opts.work_dir / "registration.json"
        report_path.write_text(registration.model_dump_json(indent=2) + "\n")

        registered, api_response = False, None
        if client is not None and not problems:
            body = registration.model_dump_json().encode()
            api_response = _signed_post(
                client,
                api + REGISTRATION_PATH,
                body,
                key,
                opts.network,
            )
            registered = True
            if registration.gpus and not opts.skip_challenge:
                rounds = _api_rounds(opts, key, api, gpu_compute)
                problems.extend(
                    f"GPU {r.gpu_uuid} failed the API's challenge: {r.reason}"
                    for r in rounds
                    if r.status != "passed"
                )
    finally:
        if client is not None:
            client.close()
    return OnboardOutcome(
        registration=registration,
        key_id=key.key_id,
        key_file=opts.key_file,
        key_created=created,
        report_path=report_path,
        registered=registered,
        api_response=api_response,
        problems=tuple(problems),
    )


def _api_rounds(opts: OnboardOptions, key: Any, api: str, gpu_compute: Any) -> list[Any]:
    """The API's own challenge round for each registered GPU (worker/api_challenge.py): the
    API offers a GPU only once it passed one."""
    from datetime import UTC, datetime

    from worker.api_challenge import challenge_due, compute_on_gpu
    from worker.api_client import ApiClient, ApiClientError

    try:
        with ApiClient(api, key, opts.network, timeout_s=opts.timeout_s) as client:
            return challenge_due(client, datetime.now(UTC), gpu_compute or compute_on_gpu)
    except (ApiClientError, RuntimeError, ValueError) as e:
        raise OnboardingError(f"the API's GPU challenge could not run: {e}") from e


def _run_challenges(
    opts: OnboardOptions, inventory: Any, nonce: str, problems: list[str]
) -> list[Any]:
    from proofnet.messages.registration import (
        ChallengeReport,
        InclusionProofReport,
        RevealedRowReport,
    )
    from worker.challenge import (
        ChallengeError,
        ChallengeSpec,
        assess_throughput,
        reveal_indices,
        run_challenge,
        seed_from_nonce,
        verify_freivalds,
    )

    n = opts.challenge_n or (_DEFAULT_N_CPU if inventory.cpu_only else _DEFAULT_N_GPU)
    try:
        base = ChallengeSpec(seed=seed_from_nonce(nonce), n=n, dtype=opts.dtype)
    except ChallengeError as e:
        raise OnboardingError(f"bad challenge parameters: {e}") from e
    targets: list[Any] = list(inventory.gpus) or [None]
    reports = []
    for gpu in targets:
        spec = base if gpu is None else base.for_gpu(gpu.index)
        try:
            if gpu is None:
                result = run_challenge(spec, backend="numpy")
            else:
                result = run_challenge(spec, gpu_index=gpu.index, gpu_uuid=gpu.uuid)
        except ChallengeError as e:
            raise OnboardingError(f"the challenge could not run: {e}") from e
        on_gpu = result.backend != "numpy"
        if gpu is not None and not on_gpu:
            problems.append(
                "the GPU challenge ran on the CPU: install torch (or cupy) with CUDA so the "
                "worker can use its GPUs"
            )
        if gpu is not None and on_gpu and result.device_uuid not in (None, gpu.uuid):
            problems.append(
                f"the challenge for {gpu.uuid} ran on {result.device_uuid}: CUDA and NVML "
                "disagree about the GPUs (CUDA_VISIBLE_DEVICES?)"
            )
        check = verify_freivalds(spec.seed, spec.n, result.c, rounds=2)
        if not check.ok:
            problems.append(f"the GPU computed a wrong product ({check.reason}): faulty hardware?")
        plaus = assess_throughput(spec, result.elapsed_s, gpu.name if gpu and on_gpu else None)
        if not plaus.ok:
            problems.append(f"implausible challenge timing: {plaus.detail}")
        picks = reveal_indices(result.commitment, nonce, spec.n, _REVEALED_ROWS_PER_CHALLENGE)
        reports.append(
            ChallengeReport(
                gpu_index=None if gpu is None else gpu.index,
                gpu_uuid=None if gpu is None else gpu.uuid,
                seed=spec.seed,
                n=spec.n,
                dtype=spec.dtype,  # type: ignore[arg-type]
                commitment=result.commitment,
                elapsed_s=result.elapsed_s,
                tflops=result.flops_per_s / 1e12,
                backend=result.backend,  # type: ignore[arg-type]
                device=result.device,
                self_check=check.reason,
                plausibility=plaus.verdict,
                plausibility_detail=plaus.detail,
                revealed=[
                    RevealedRowReport(
                        index=row.index,
                        values=list(row.values),
                        proof=InclusionProofReport(
                            index=row.proof.index,
                            size=row.proof.size,
                            path=[h.hex() for h in row.proof.path],
                        ),
                    )
                    for row in result.reveal(picks)
                ],
            )
        )
        if gpu is not None and not on_gpu:
            break  # one CPU run says all there is to say; n^3 per GPU on a CPU would not
    return reports


# --- the command ---------------------------------------------------------------------------


@app.command()
def onboard(
    api_url: str | None = typer.Option(None, "--api-url", help="register with this proofnet API"),
    payout_address: str | None = typer.Option(
        None, "--payout-address", help="bech32 Cardano address that receives this worker's NTX"
    ),
    key_file: Path | None = typer.Option(None, "--key-file", help="worker key (created if absent)"),
    work_dir: Path | None = typer.Option(
        None, "--work-dir", help="where the registration is written"
    ),
    network: str | None = typer.Option(
        None, "--network", help="devnet, preprod, preview or mainnet"
    ),
    json_out: bool = typer.Option(False, "--json", help="print one JSON document"),
    skip_challenge: bool = typer.Option(False, "--skip-challenge", help="skip the GPU challenge"),
    skip_runtime_check: bool = typer.Option(
        False, "--skip-runtime-check", help="skip the container GPU runtime check"
    ),
    challenge_n: int | None = typer.Option(
        None, "--challenge-n", help="matrix size of the challenge"
    ),
    dtype: str = typer.Option("float32", "--dtype", help="challenge dtype: float32 or float64"),
    gpu_image: str | None = typer.Option(None, "--gpu-image", help="image for the runtime check"),
) -> None:
    """Check this machine and register it as a proofnet provider."""
    from proofnet.settings import absolute, build_settings
    from worker.gpu_runtime_check import DEFAULT_IMAGE

    settings = build_settings()
    opts = OnboardOptions(
        api_url=api_url,
        payout_address=payout_address,
        # Absolute here, at the edge: `run` may start from another directory.
        key_file=absolute(key_file) if key_file else settings.worker_key_file,
        work_dir=absolute(work_dir) if work_dir else settings.worker_work_dir,
        network=network or settings.network,
        skip_challenge=skip_challenge,
        skip_runtime_check=skip_runtime_check,
        challenge_n=challenge_n,
        dtype=dtype,
        gpu_image=gpu_image or DEFAULT_IMAGE,
    )
    try:
        outcome = run_onboarding(opts)
    except OnboardingError as e:
        if json_out:
            typer.echo(json.dumps({"ok": False, "error": str(e)}))
        else:
            typer.secho(f"onboarding failed: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from e
    if json_out:
        typer.echo(
            json.dumps(
                {
                    "ok": outcome.ok,
                    "problems": list(outcome.problems),
                    "key_id": outcome.key_id,
                    "key_file": str(outcome.key_file),
                    "key_created": outcome.key_created,
                    "report_path": str(outcome.report_path),
                    "registered": outcome.registered,
                    "api_response": outcome.api_response,
                    "registration": outcome.registration.model_dump(mode="json"),
                },
                indent=2,
            )
        )
    else:
        _print_summary(outcome, opts)
    if not outcome.ok:
        raise typer.Exit(1)


def _print_summary(outcome: OnboardOutcome, opts: OnboardOptions) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=sys.stdout)
    reg = outcome.registration
    caps = reg.capabilities
    console.rule("proofnet worker onboarding")
    if caps.cpu_only:
        console.print(f"[yellow]CPU-only worker[/]: {caps.cpu_only_reason}")
    else:
        table = Table("GPU", "name", "UUID", "memory", "CC", "PCI")
        for g, d in zip(reg.gpus, caps.gpus, strict=True):
            table.add_row(
                str(g.index),
                g.name,
                g.uuid,
                f"{g.memory_mb / 1024:.0f} GiB",
                d.compute_capability,
                d.pci_bus_id,
            )
        console.print(table)
        console.print(f"driver {caps.driver_version}, CUDA {caps.cuda_version}")
    host = caps.host
    console.print(
        f"host: {host.cpu_model} x{host.cpu_count}, {host.ram_total_bytes / 2**30:.1f} GiB RAM, "
        f"{host.disk_free_bytes / 2**30:.1f} GiB free for the work dir, {host.os}"
    )
    rt = caps.runtime_check
    colour = {"ok": "green", "failed": "red", "skipped": "yellow"}[rt.status]
    console.print(f"container GPU runtime: [{colour}]{rt.status}[/] {rt.diagnosis}")
    if rt.fix:
        console.print(f"  fix: {rt.fix}")
    for c in caps.challenges:
        where = f"GPU {c.gpu_index}" if c.gpu_index is not None else "CPU"
        console.print(
            f"challenge {where}: n={c.n} {c.dtype} on {c.device} in {c.elapsed_s * 1e3:.1f} ms "
            f"({c.tflops:.2f} TFLOP/s, {c.plausibility}); {c.self_check}"
        )
    if not caps.challenges:
        console.print("challenge: skipped")
    state = "created" if outcome.key_created else "loaded"
    console.print(f"worker key {outcome.key_id} ({state}: {outcome.key_file})")
    if reg.binding is not None:
        console.print(f"payout: {reg.binding.payout_address} on {reg.binding.network} (signed)")
    else:
        console.print("[yellow]no payout address[/]: rerun with --payout-address to be paid")
    console.print(f"registration written to {outcome.report_path}")
    if outcome.registered:
        console.print(f"[green]registered with {redact_credentials(opts.api_url or '')}[/]")
    for p in outcome.problems:
        console.print(f"[red]problem[/]: {p}")
    if outcome.problems and opts.api_url:
        console.print("[red]not registered[/]: fix the problems above and rerun")


# --- run -----------------------------------------------------------------------------------


class RunSetupError(Exception):
    """`worker run` cannot start; the message says what to fix."""


def _check_verify_only(
    config: AgentConfig, isolated: bool, *, once: bool, max_jobs: int | None
) -> None:
    """A verify-only worker must be able to verify, and counts no jobs."""
    if not config.verify:
        raise RunSetupError("--verify-only with --no-verify leaves this worker nothing to do")
    if once or max_jobs is not None:
        raise RunSetupError("--verify-only claims no job: --once and --max-jobs do not apply")
    if not config.trusted_oracle_keys:
        raise RunSetupError(
            "--verify-only answers tasks of trusted oracles only: set --oracle-key (repeat) "
            "or PROOFNET_WORKER_ORACLE_KEYS"
        )
    if not isolated and not config.demo_process_verify:
        raise RunSetupError(
            "--verify-only needs a runtime that isolates job code (--runtime docker); the "
            "process runtime verifies only in the local demo on the devnet"
        )


def _payout_address(explicit: str | None, work_dir: Path) -> str:
    if explicit:
        return explicit
    report = work_dir / "registration.json"
    try:
        binding = json.loads(report.read_text()).get("binding") or {}
    except (OSError, ValueError) as e:
        raise RunSetupError(
            f"no --payout-address and no readable {report} ({e}); run `proofnet worker "
            "onboard --payout-address ...` first or pass --payout-address"
        ) from e
    address = binding.get("payout_address")
    if not isinstance(address, str) or not address:
        raise RunSetupError(f"{report} has no payout binding; pass --payout-address")
    return address


def _rewrites(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        prefix, sep, replacement = item.partition("=")
        if not sep or not prefix or not replacement:
            raise RunSetupError(f"--repo-rewrite wants PREFIX=REPLACEMENT, got {item!r}")
        out[prefix] = replacement
    return out


def data_policy_from_settings(settings: Any, local_dirs: list[Path]) -> Any:
    """The provider's rules for job data and repositories, from its settings and flags."""
    import os

    from proofnet.egress import EgressPolicy
    from proofnet.settings import absolute
    from worker.data_fetch import DataFetchPolicy

    networks = [n for n in settings.worker_data_allow_networks.split(",") if n.strip()]
    try:
        egress = EgressPolicy.allowing(networks)
    except ValueError as e:
        raise RunSetupError(f"PROOFNET_WORKER_DATA_ALLOW_NETWORKS: {e}") from e
    dirs = local_dirs or [
        absolute(Path(d)) for d in settings.worker_local_data_dirs.split(os.pathsep) if d.strip()
    ]
    return DataFetchPolicy(
        allow_http=settings.worker_data_allow_http,
        max_mb=settings.worker_data_max_mb,
        timeout_s=settings.worker_data_timeout_s,
        egress=egress,
        local_dirs=tuple(dirs),
    )


def _make_runtime(
    name: str, *, allow_cluster_networking: bool = False, advertise_host: str = "127.0.0.1"
) -> Any:
    if name == "process":
        from worker.runtime.process_runtime import ProcessRuntime

        return ProcessRuntime()
    if name == "docker":
        from worker.cluster import check_reachable_host
        from worker.runtime.base import EngineUnavailable, JobStartFailed
        from worker.runtime.docker_runtime import DockerRuntime, connect

        # Fail at start-up, not on every node of a cluster after it formed.
        if allow_cluster_networking:
            try:
                check_reachable_host(advertise_host)
            except ValueError as e:
                raise RunSetupError(
                    f"--allow-cluster-networking: {e}; set --advertise-host "
                    "(PROOFNET_WORKER_ADVERTISE_HOST) to an address the other nodes can reach"
                ) from e
        try:
            runtime = DockerRuntime(connect(), allow_cluster_networking=allow_cluster_networking)
            if allow_cluster_networking:
                runtime.check_cluster_networking()
        except (EngineUnavailable, JobStartFailed) as e:
            raise RunSetupError(str(e)) from e
        return runtime
    raise RunSetupError(f"unknown runtime {name!r}; use docker or process")


app.command("rate-card")(rate_card)
app.command("bid")(bid)
app.command("reveal")(reveal)
app.command("auctions")(auctions)
app.command("status")(status)


@app.command()
def run(
    api_url: str | None = typer.Option(None, "--api-url", help="the proofnet API"),
    oracle_url: str | None = typer.Option(None, "--oracle-url", help="the oracle"),
    runtime_name: str | None = typer.Option(
        None, "--runtime", help="docker (isolated) or process (NOT isolated; development)"
    ),
    once: bool = typer.Option(False, "--once", help="run at most one job, then exit"),
    max_jobs: int | None = typer.Option(None, "--max-jobs", min=1, help="exit after N jobs"),
    metrics_port: int | None = typer.Option(
        None, "--metrics-port", help="serve Prometheus metrics on this port (127.0.0.1)"
    ),
    key_file: Path | None = typer.Option(
        None, "--key-file", help="the worker key [default: PROOFNET_WORKER_KEY_FILE]"
    ),
    work_dir: Path | None = typer.Option(
        None, "--work-dir", help="jobs, logs, outbox [default: PROOFNET_WORKER_WORK_DIR]"
    ),
    network: str | None = typer.Option(None, "--network", help="devnet, preprod, preview, mainnet"),
    payout_address: str | None = typer.Option(
        None, "--payout-address", help="default: the one bound at onboarding"
    ),
    rate_card: list[Path] = typer.Option([], "--rate-card", help="rate card document (repeat)"),
    repo_rewrite: list[str] = typer.Option(
        [], "--repo-rewrite", help="PREFIX=REPLACEMENT for repository URLs, like git insteadOf"
    ),
    poll_interval: float = typer.Option(5.0, "--poll-interval", help="seconds between claims"),
    grace: float = typer.Option(30.0, "--grace", help="seconds a job may finish after SIGTERM"),
    keep_workspaces: bool = typer.Option(False, "--keep-workspaces", help="keep job dirs"),
    advertise_host: str | None = typer.Option(
        None,
        "--advertise-host",
        help="address other nodes of a multi-node job reach this machine at",
    ),
    allow_cluster_networking: bool = typer.Option(
        False,
        "--allow-cluster-networking",
        help="docker runtime: take multi-node jobs, whose nodes run with the HOST's network "
        "(and so its egress and open ports); without it the worker claims no cluster nodes",
    ),
    allow_egress: bool = typer.Option(
        False,
        "--allow-egress",
        help="run jobs that ask for network egress (egress: true) with it; without this "
        "they are handed back [default: PROOFNET_WORKER_ALLOW_EGRESS]",
    ),
    local_data_dir: list[Path] = typer.Option(
        [],
        "--local-data-dir",
        help="a directory whose files jobs may name as file:// data shards (repeat); "
        "without one, file:// data is refused [default: PROOFNET_WORKER_LOCAL_DATA_DIRS]",
    ),
    oracle_key: list[str] = typer.Option(
        [],
        "--oracle-key",
        help="Ed25519 key (hex) of an oracle whose key requests for a sealed job's proof "
        "files this worker answers (repeat) [default: PROOFNET_WORKER_ORACLE_KEYS]",
    ),
    verify: bool = typer.Option(
        True,
        "--verify/--no-verify",
        help="replay segments of other providers' proofs when a trusted oracle draws this "
        "worker as verifier (Docker runtime only; paid a verification fee)",
    ),
    verify_only: bool = typer.Option(
        False,
        "--verify-only",
        help="contribute verification only: replay what trusted oracles draw this worker "
        "for and answer disputes, never claim a job [default: PROOFNET_WORKER_VERIFY_ONLY]",
    ),
    log_level: str = typer.Option("INFO", "--log-level"),
) -> None:
    """Claim jobs from the API, run them with proof of training, and attest to the oracle."""
    import logging
    import signal

    from proofnet.settings import absolute, build_settings
    from worker.agent import Agent, AgentConfig
    from worker.api_client import ApiClient
    from worker.identity import IdentityError, load_key
    from worker.oracle_client import OracleClient
    from worker.pricing import PricingError, load_rate_card, rate_cards_by_digest
    from worker.telemetry import TelemetrySampler
    from worker.workspace import RepoCache

    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = build_settings()
    # Every path absolute here, at the edge: git runs in job dirs, jobs in containers.
    wd = absolute(work_dir) if work_dir else settings.worker_work_dir
    try:
        key = load_key(absolute(key_file) if key_file else settings.worker_key_file)
        cards = rate_cards_by_digest(load_rate_card(absolute(p)) for p in rate_card)
        data_policy = data_policy_from_settings(settings, [absolute(p) for p in local_data_dir])
        config = AgentConfig(
            work_dir=wd,
            network=network or settings.network,
            payout_address=_payout_address(payout_address, wd),
            heartbeat_s=settings.worker_heartbeat_s,
            verification_poll_s=settings.worker_verification_poll_s,
            poll_interval_s=poll_interval,
            grace_s=grace,
            rate_cards=cards,
            keep_workspaces=keep_workspaces,
            advertise_host=advertise_host or settings.worker_advertise_host,
            trusted_oracle_keys=tuple(
                k.strip().lower()
                for k in (oracle_key or settings.worker_oracle_keys.split(","))
                if k.strip()
            ),
            verify=verify,
            verify_only=verify_only or settings.worker_verify_only,
            demo_process_verify=settings.worker_demo_process_verify,
            data=data_policy,
            allow_egress=allow_egress or settings.worker_allow_egress,
        )
        # One mirror cache per user, shared by every job (and process) of this machine.
        repos = RepoCache(
            settings.git_cache_dir, rewrites=_rewrites(repo_rewrite), egress=data_policy.egress
        )
        if config.demo_process_verify and config.network != "devnet":
            raise RunSetupError(
                "PROOFNET_WORKER_DEMO_PROCESS_VERIFY runs other providers' job code on this "
                "host, unisolated: it is for the local demo on the devnet only"
            )
        runtime = _make_runtime(
            runtime_name or settings.worker_runtime,
            allow_cluster_networking=(
                allow_cluster_networking or settings.worker_allow_cluster_networking
            ),
            advertise_host=config.advertise_host,
        )
        if config.verify_only:
            _check_verify_only(config, runtime.isolated, once=once, max_jobs=max_jobs)
    except (IdentityError, PricingError, RunSetupError) as e:
        typer.secho(f"worker cannot start: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from e
    if not runtime.isolated:
        typer.secho(
            "WARNING: the process runtime does not isolate jobs; use --runtime docker for "
            "jobs you do not trust",
            fg=typer.colors.YELLOW,
            err=True,
        )
    elif runtime.cluster_networking:
        typer.secho(
            "cluster networking allowed: nodes of multi-node jobs run with this host's "
            f"network (egress included); other nodes reach this one at {config.advertise_host}",
            fg=typer.colors.YELLOW,
            err=True,
        )

    sampler = TelemetrySampler(interval_s=1.0)
    sampler.start()
    metrics_server = sampler.serve_metrics(metrics_port) if metrics_port is not None else None
    api = ApiClient(api_url or settings.api_url, key, config.network)
    oracle = OracleClient(oracle_url or settings.oracle_url)
    agent = Agent(
        config, api=api, oracle=oracle, runtime=runtime, sampler=sampler, key=key, repos=repos
    )

    def on_signal(signum: int, _frame: Any) -> None:
        if agent.stopping:
            agent.stop_now()
        else:
            agent.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        stats = agent.run(max_jobs=max_jobs, once=once)
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()
        sampler.close()
        api.close()
        oracle.close()
    for outcome in stats.outcomes:
        typer.echo(f"{outcome.job_id} attempt {outcome.attempt}: {outcome.status} {outcome.reason}")
    typer.echo(f"worker stopped after {stats.jobs} job(s)")
