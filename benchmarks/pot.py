"""Figures for `proofnet bench worker`: proof-of-training overhead, attestation sign/verify rates.

Targets (notes/compute.md): recording at k = 100 costs at most 3% of training time;
verifying attestations runs at >= 2,000/s on one core (raw Ed25519 is about 6k/s).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pot.examples.numpy_mlp import MLPConfig, MLPModel, make_dataset
from pot.recorder import ProofOfTraining
from pot.seeds import BatchSampler

OVERHEAD_TARGET = 0.03
VERIFY_TARGET_PER_S = 2000.0

# About 140k float32 parameters and ~1-3 ms per step on one core: a "small" loop whose step
# is still long enough that the measurement is not all Python overhead.
BENCH_MLP = MLPConfig(
    examples=8192, features=256, hidden=512, classes=10, batch_size=128, dtype="float32"
)


@dataclass(frozen=True)
class PotOverhead:
    k: int
    steps: int
    parameters: int
    step_s: float  # mean step time without the recorder
    step_with_pot_s: float  # mean step time with it (end to end; noisy on a busy machine)
    recorder_s_per_step: float  # time spent inside recorder calls, per step
    overhead: float  # recorder time / training time: the figure held to the 3% target
    overhead_end_to_end: float  # (with - without) / without, for cross-checking
    checkpoint_bytes: int  # bytes written per checkpoint (weights + optimizer)

    @property
    def meets_target(self) -> bool:
        return self.overhead <= OVERHEAD_TARGET


@dataclass(frozen=True)
class AttestationRates:
    n: int
    sign_per_s: float
    verify_per_s: float

    @property
    def meets_target(self) -> bool:
        return self.verify_per_s >= VERIFY_TARGET_PER_S


def _run(cfg: MLPConfig, steps: int, k: int, pot_dir: Path | None) -> tuple[float, float]:
    """(total seconds, seconds inside recorder calls)."""
    x, y = make_dataset(7, cfg)
    trainer = MLPModel(x, y, cfg, init_seed=7)
    sampler = BatchSampler(7, cfg.examples, cfg.batch_size)
    pot = None
    if pot_dir is not None:
        pot = ProofOfTraining(pot_dir, steps_per_checkpoint=k, data_seed=7)
    clock = time.perf_counter
    in_pot = 0.0
    start = clock()
    if pot is not None:
        t = clock()
        pot.start(trainer.state())
        in_pot += clock() - t
    for step in range(1, steps + 1):
        indices = sampler.indices(step)
        loss = trainer.train_step(step, indices)
        if pot is not None:
            t = clock()
            if pot.record_step(indices, loss):
                pot.commit(trainer.state())
            in_pot += clock() - t
    if pot is not None:
        t = clock()
        pot.finish(trainer.state())
        in_pot += clock() - t
    return clock() - start, in_pot


def measure_pot_overhead(
    *, k: int = 100, steps: int = 1000, repeats: int = 3, cfg: MLPConfig = BENCH_MLP
) -> PotOverhead:
    """Train the same loop with and without the recorder, interleaved; best of `repeats`.

    The recorder's run includes the initial checkpoint and the manifest, so short runs
    overstate the steady-state overhead slightly.
    """
    if steps < k:
        raise ValueError("steps must cover at least one checkpoint")
    plain: list[float] = []
    recorded: list[float] = []
    recorder: list[float] = []
    with tempfile.TemporaryDirectory(prefix="proofnet-bench-pot-") as tmp:
        _run(cfg, min(steps, 50), k, None)  # warm up BLAS and caches
        for i in range(repeats):
            plain.append(_run(cfg, steps, k, None)[0])
            total, in_pot = _run(cfg, steps, k, Path(tmp) / f"run{i}")
            recorded.append(total)
            recorder.append(in_pot)
        first = Path(tmp) / "run0"
        ckpt_bytes = (first / "000001.weights").stat().st_size + (
            first / "000001.optim"
        ).stat().st_size
    params = cfg.features * cfg.hidden + cfg.hidden + cfg.hidden * cfg.classes + cfg.classes
    base, with_pot, in_pot = min(plain), min(recorded), min(recorder)
    return PotOverhead(
        k=k,
        steps=steps,
        parameters=params,
        step_s=base / steps,
        step_with_pot_s=with_pot / steps,
        recorder_s_per_step=in_pot / steps,
        overhead=in_pot / base,
        overhead_end_to_end=(with_pot - base) / base,
        checkpoint_bytes=ckpt_bytes,
    )


def measure_attestation_rates(n: int = 2000) -> AttestationRates:
    """Sign and verify one realistic attestation `n` times each (one core)."""
    from nacl.signing import SigningKey

    from proofnet.messages.address import enterprise_address
    from proofnet.messages.attestation import Attestation, sign_attestation, verify_attestation

    sk = SigningKey(b"\x11" * 32)
    vk = bytes(sk.verify_key)
    script = "ab" * 28
    att = Attestation.model_validate(
        {
            "domain": {
                "network": "preprod",
                "escrow_script_hash": script,
                "escrow": {"tx_id": "cd" * 32, "index": 0},
                "job_id": "ef" * 32,
            },
            "worker_key": vk.hex(),
            "payout_address": enterprise_address(vk, "preprod"),
            "started_ms": 1_760_000_000_000,
            "ended_ms": 1_760_003_600_000,
            "gpu_milliseconds": 3_600_000,
            "gpu_model": "NVIDIA H200",
            "gpu_uuid_sha256": "01" * 32,
            "image_digest": "sha256:" + "02" * 32,
            "command_hash": "03" * 32,
            "result_hashes": {"model.pt": "04" * 32, "metrics.json": "05" * 32},
            "pot_root": "06" * 32,
            "metrics": {"accuracy": "0.9312", "loss": "0.1875", "steps": 10000},
            "nonce": "07" * 16,
            "amount": 12_500_000,
        }
    )
    start = time.perf_counter()
    for _ in range(n):
        signed = sign_attestation(att, sk)
    sign_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(n):
        verify_attestation(signed.cose, expected_network="preprod", expected_script_hash=script)
    verify_s = time.perf_counter() - start
    return AttestationRates(n=n, sign_per_s=n / sign_s, verify_per_s=n / verify_s)


def run_worker_bench(
    *,
    k: int = 100,
    steps: int = 1000,
    repeats: int = 3,
    attestations: int = 2000,
    cfg: MLPConfig = BENCH_MLP,
) -> dict[str, object]:
    """Everything `proofnet bench worker` reports, as one JSON-able dict."""
    overhead = measure_pot_overhead(k=k, steps=steps, repeats=repeats, cfg=cfg)
    rates = measure_attestation_rates(attestations)
    return {
        "pot": {
            **asdict(overhead),
            "target": OVERHEAD_TARGET,
            "meets_target": overhead.meets_target,
        },
        "attestation": {
            **asdict(rates),
            "verify_target_per_s": VERIFY_TARGET_PER_S,
            "meets_target": rates.meets_target,
        },
    }
