#!/usr/bin/env bash
# Worker onboarding on a real GPU: NVML inventory (and a raw NVML recording for the test
# fake), the matrix-multiply challenge timed and Freivalds-checked on every GPU, the container
# GPU runtime check, and telemetry (power, energy counter, GPU-seconds) sampled under load.
#
# Usage: scripts/device_check.sh            (PYTHON=... to pick the interpreter)
# Needs the project's Python dependencies (numpy, nvidia-ml-py, prometheus-client, PyNaCl,
# pydantic) and, to time the GPU rather than the CPU, torch with CUDA (or cupy).
# Finishes in about 3 minutes on one GPU. Exit status: 0 all checks passed, 1 a check
# failed, 3 no GPU found (CPU paths ran).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

echo "== nvidia-smi -L"
nvidia-smi -L 2>&1 || echo "(nvidia-smi unavailable)"
echo "== python: $("$PYTHON" -c 'import sys; print(sys.executable, sys.version.split()[0])')"

exec timeout 240 "$PYTHON" - <<'PY'
import json
import sys
import time

failures: list[str] = []


def section(title: str) -> None:
    print(f"\n== {title}", flush=True)


def fail(what: str) -> None:
    failures.append(what)
    print(f"FAIL: {what}", flush=True)


section("frameworks")
try:
    import torch

    cuda = torch.cuda.is_available()
    print(f"torch {torch.__version__}, CUDA available: {cuda}, "
          f"devices: {torch.cuda.device_count() if cuda else 0}, "
          f"tf32 matmul default: {torch.backends.cuda.matmul.allow_tf32}")
except ImportError:
    torch = None
    print("torch not installed: the challenge will run on cupy or the CPU")

from worker.inventory import InventoryError, collect_inventory, record_nvml

section("NVML recording (format of tests/worker/data/*.json)")
try:
    recording = record_nvml()
    recording["recorded"]["source"] = "scripts/device_check.sh on a real device"
    print(json.dumps(recording, indent=2))
except Exception as e:  # a machine without NVML cannot be recorded; the inventory says why
    print(f"no recording: {type(e).__name__}: {e}")

section("inventory")
try:
    inv = collect_inventory(work_dir=__import__("pathlib").Path(".proofnet/worker"))
except InventoryError as e:
    fail(f"inventory: {e}")
    print("DEVICE CHECK FAILED:", "; ".join(failures))
    sys.exit(1)
print(json.dumps(inv.to_dict(), indent=2))
if inv.cpu_only:
    print(f"CPU-only: {inv.cpu_only_reason}")

section("challenge")
from worker.challenge import ChallengeSpec, assess_throughput, run_challenge, verify_freivalds

plans = [(4096, "float32"), (8192, "float32"), (4096, "float64")] if inv.gpus else [(512, "float32")]
for gpu in inv.gpus or [None]:
    for n, dtype in plans:
        spec = ChallengeSpec(seed=20240601, n=n, dtype=dtype)
        if gpu is not None:
            spec = spec.for_gpu(gpu.index)
        t0 = time.perf_counter()
        if gpu is None:
            result = run_challenge(spec, backend="numpy")
        else:
            result = run_challenge(spec, gpu_index=gpu.index, gpu_uuid=gpu.uuid)
        wall = time.perf_counter() - t0
        t1 = time.perf_counter()
        verdict = verify_freivalds(spec.seed, spec.n, result.c, rounds=2)
        verify_s = time.perf_counter() - t1
        on_gpu = result.backend != "numpy"
        plaus = assess_throughput(spec, result.elapsed_s, gpu.name if gpu and on_gpu else None)
        print(f"{'GPU %d' % gpu.index if gpu else 'CPU'} n={n} {dtype}: backend={result.backend} "
              f"device={result.device!r} uuid={result.device_uuid} "
              f"matmul={result.elapsed_s * 1e3:.2f} ms ({result.flops_per_s / 1e12:.2f} TFLOP/s) "
              f"plausibility={plaus.verdict} [{plaus.detail}] "
              f"freivalds={verdict.ok} ({verdict.reason}, {verify_s:.2f} s) "
              f"end-to-end={wall:.2f} s commitment={result.commitment[:16]}...")
        if not verdict.ok:
            fail(f"challenge n={n} {dtype}: {verdict.reason}")
        if not plaus.ok:
            fail(f"challenge n={n} {dtype}: {plaus.detail}")
        if gpu is not None and not on_gpu:
            fail("the GPU challenge fell back to the CPU (no torch/cupy with CUDA)")
            break
        if gpu is not None and result.device_uuid not in (None, gpu.uuid):
            fail(f"CUDA device {result.device_uuid} is not NVML's {gpu.uuid}")
    if torch is not None and gpu is not None and torch.cuda.is_available():
        # With TF32 on, small-integer products must stay exact and below the TF32 peak.
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            spec = ChallengeSpec(seed=7, n=8192).for_gpu(gpu.index)
            result = run_challenge(spec, gpu_index=gpu.index, gpu_uuid=gpu.uuid)
            verdict = verify_freivalds(spec.seed, spec.n, result.c)
            plaus = assess_throughput(spec, result.elapsed_s, gpu.name)
            print(f"GPU {gpu.index} n=8192 float32 with TF32: {result.elapsed_s * 1e3:.2f} ms "
                  f"({result.flops_per_s / 1e12:.1f} TFLOP/s) plausibility={plaus.verdict} "
                  f"freivalds={verdict.ok}")
            if not verdict.ok:
                fail(f"TF32 product not exact: {verdict.reason}")
            if not plaus.ok:
                fail(f"TF32 timing: {plaus.detail}")
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before

section("the API's challenge round (worker/api_challenge.py, checked as the API checks it)")
# The round as the API runs it, in-process: seed, A and B derived (untimed), the start (the
# API's clock is this perf_counter from here; the sign vector d), compute and commit on the
# GPU, rows drawn after the commitment, Freivalds over them, and the time against the
# claimed model's minimum plausible throughput plus the allowance.
import secrets as _secrets

from api.config import ApiConfig
from api.services.gpu_challenges import allowed_seconds, min_tflops, plausible_tflops
from proofnet.messages.gpu_challenge import challenge_matrices, check_revealed_rows, column_signs
from proofnet.messages.registration import InclusionProofReport, RevealedRowReport
from worker.api_challenge import compute_on_gpu

api_config = ApiConfig(database_url="sqlite://", network="devnet")
for gpu in inv.gpus:
    for n in (8192, 16384):
        spec = ChallengeSpec(seed=_secrets.randbelow(2**63), n=n)
        t_gen = time.perf_counter()
        a, b = challenge_matrices(spec.seed, n)
        gen_s = time.perf_counter() - t_gen
        signs_key = _secrets.token_hex(32)
        t0 = time.perf_counter()
        try:
            result = compute_on_gpu(spec, gpu.index, gpu.uuid, (a * column_signs(signs_key, n), b))
            commitment = result.commitment
        except Exception as e:
            fail(f"API round n={n} on GPU {gpu.index}: {e}")
            break
        elapsed = time.perf_counter() - t0
        picks = sorted(_secrets.SystemRandom().sample(range(n), api_config.gpu_challenge_rows))
        rows = [
            RevealedRowReport(
                index=r.index,
                values=list(r.values),
                proof=InclusionProofReport(
                    index=r.proof.index, size=r.proof.size, path=[h.hex() for h in r.proof.path]
                ),
            )
            for r in result.reveal(picks)
        ]
        t1 = time.perf_counter()
        why = check_revealed_rows(
            spec.seed, n, signs_key, commitment, picks, rows, _secrets.token_bytes(32)
        )
        check_s = time.perf_counter() - t1
        allowed = allowed_seconds(api_config, gpu.name, n)
        print(f"GPU {gpu.index} {gpu.name} n={n}: A,B derived in {gen_s:.2f} s (untimed), "
              f"start-to-commitment {elapsed:.2f} s "
              f"(matmul {result.elapsed_s * 1e3:.1f} ms), allowed {allowed:.2f} s "
              f"(min {min_tflops(gpu.name):g} TFLOP/s + {api_config.gpu_challenge_overhead_s:g} s), "
              f"API check {check_s:.2f} s: {'passed' if why is None else why}")
        if why is not None:
            fail(f"API round n={n}: {why}")
        if n == api_config.gpu_challenge_n and elapsed > allowed:
            fail(f"API round n={n}: {elapsed:.2f} s exceeds the {allowed:.2f} s allowed")
        # The band's two ends against the product alone (the datasheet row is the variant's).
        low, high = plausible_tflops(gpu.name)
        matmul_tflops = 2 * n**3 / max(result.elapsed_s, 1e-9) / 1e12
        print(f"  matmul alone {matmul_tflops:.1f} TFLOP/s; band for {gpu.name}: "
              f"{low:g}-{high:g} TFLOP/s")
        if matmul_tflops > high:
            fail(f"API round n={n}: {matmul_tflops:.1f} TFLOP/s is above the band's upper end "
                 f"{high:g}: the datasheet row for {gpu.name} is wrong")

section("step-time spread (oracle/verification/metering.py's slack)")
# The metering slack is sized for the verifier/provider step-time ratio noise sigma_r:
# slack = (1 - a) / (1 - 3 sigma_r) (docs/benchmarks.md, "Metering slack"). One GPU gives
# the run-to-run part: a training step loop timed as a verifier times a replay, segment by
# segment, in fresh runs; sigma_r is about sqrt(2) x this spread on two GPUs of one model.
try:
    import statistics as _stats

    import torch

    if torch.cuda.is_available():
        dev = torch.device("cuda:0")
        gen = torch.Generator(device=dev).manual_seed(7)
        model = torch.nn.Sequential(
            torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096)
        ).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        x = torch.randn(512, 4096, device=dev, generator=gen)
        y = torch.randn(512, 4096, device=dev, generator=gen)

        def segment(steps: int = 100) -> float:
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(steps):
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            torch.cuda.synchronize()
            return (time.perf_counter() - t) / steps

        segment(20)  # warm-up
        times = [segment() for _ in range(15)]
        spread = _stats.stdev(times) / _stats.mean(times)
        sigma_r = spread * 2**0.5
        print(f"step {_stats.mean(times) * 1e3:.3f} ms, spread {spread:.2%} over 15 segments "
              f"of 100 steps; sigma_r ~ {sigma_r:.2%}; slack at a = 2.5 %: "
              f"{(1 - 0.025) / max(1 - 3 * sigma_r, 1e-9):.3f} (default 1.15)")
    else:
        print("no CUDA: not measured")
except ImportError:
    print("torch not installed: not measured")

section("container GPU runtime")
from worker.gpu_runtime_check import check_gpu_runtime

rt = check_gpu_runtime([g.uuid for g in inv.gpus], timeout_s=60)
print(f"status={rt.status} problem={rt.problem}: {rt.diagnosis}")
if rt.fix:
    print(f"fix: {rt.fix}")
if rt.detail:
    print(f"detail: {rt.detail[:500]}")
# Device machines often have no Docker: reported, not counted as a worker-code failure.

section("telemetry under load")
from prometheus_client import generate_latest

from worker.telemetry import TelemetrySampler

sampler = TelemetrySampler(interval_s=0.5)
sampler.start()
try:
    time.sleep(1.2)
    sampler.start_job("device-check")
    load_s = 6.0
    t_end = time.monotonic() + load_s
    if torch is not None and inv.gpus and torch.cuda.is_available():
        x = torch.randn(8192, 8192, device="cuda")
        while time.monotonic() < t_end:
            for _ in range(10):
                y = x @ x
            torch.cuda.synchronize()
        del x, y
    else:
        time.sleep(load_s)
    usage = sampler.stop_job("device-check")
    print(json.dumps(usage.__dict__, indent=2, default=str))
    snap = sampler.snapshot()
    if snap.latest is not None:
        for g in snap.latest.gpus:
            print(f"GPU {g.index}: util={g.utilization_pct}% mem_used={g.memory_used_bytes} "
                  f"power={g.power_w} W temp={g.temperature_c} C energy_counter={g.energy_j} J")
    print(f"sampler: gpu_unavailable_reason={sampler.gpu_unavailable_reason} "
          f"sample_errors={snap.sample_errors}")
    text = generate_latest(sampler.registry).decode()
    print("\n".join(l for l in text.splitlines() if l.startswith("proofnet_worker_")))
    if inv.gpus:
        if usage.gpu_seconds < load_s * len(inv.gpus) * 0.9:
            fail(f"GPU-seconds {usage.gpu_seconds:.2f} below the {load_s:g} s of load")
        if not usage.energy_j or usage.energy_j <= 0:
            fail(f"no energy measured ({usage.energy_source})")
        if snap.sample_errors:
            fail(f"{snap.sample_errors} telemetry sample errors")
finally:
    sampler.close()

section("result")
if failures:
    print("DEVICE CHECK FAILED:", "; ".join(failures))
    sys.exit(1)
if not inv.gpus:
    print(f"NO GPU: {inv.cpu_only_reason} (CPU paths ran)")
    sys.exit(3)
print("DEVICE CHECK OK")
PY
