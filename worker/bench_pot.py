"""Figures for `proofnet bench worker`: proof-of-training overhead, attestation sign/verify rates.

Targets (notes/compute.md): recording at k = 100 costs at most 3% of training time;
verifying attestations runs at >= 2,000/s on one core (raw Ed25519 is about 6k/s).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from worker.pot.examples.numpy_mlp import MLPConfig, MLPTrainer, make_dataset
from worker.pot.recorder import ProofOfTraining
from worker.pot.seeds import BatchSampler

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
    step_with_pot_s: float
    overhead: float  # fraction of step time added by the recorder
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


def _run(cfg: MLPConfig, steps: int, k: int, pot_dir: Path | None) -> float:
    x, y = make_dataset(7, cfg)
    trainer = MLPTrainer(x, y, cfg, init_seed=7)
    sampler = BatchSampler(7, cfg.examples, cfg.batch_size)
    pot = None
    if pot_dir is not None:
        pot = ProofOfTraining(pot_dir, steps_per_checkpoint=k, data_seed=7)
    start = time.perf_counter()
    if pot is not None:
        pot.start(trainer.state())
    for step in range(1, steps + 1):
        indices = sampler.indices(step)
        loss = trainer.train_step(step, indices)
        if pot is not None and pot.record_step(indices, loss):
            pot.commit(trainer.state())
    if pot is not None:
        pot.finish(trainer.state())
    return time.perf_counter() - start


def measure_pot_overhead(
    *, k: int = 100, steps: int = 1000, repeats: int = 3, cfg: MLPConfig = BENCH_MLP
) -> PotOverhead:
    """Train the same loop with and without the recorder, interleaved; best of `repeats`.

    The recorder's run includes the initial checkpoint and the manifest, so short runs
    overstate the steady-state overhead slightly.
    """
    if steps < k:
        raise ValueError("steps must cover at least one checkpoint")
    plain, recorded = [], []
    with tempfile.TemporaryDirectory(prefix="proofnet-bench-pot-") as tmp:
        _run(cfg, min(steps, 50), k, None)  # warm up BLAS and caches
        for i in range(repeats):
            plain.append(_run(cfg, steps, k, None))
            recorded.append(_run(cfg, steps, k, Path(tmp) / f"run{i}"))
        first = Path(tmp) / "run0"
        ckpt_bytes = (first / "000001.weights").stat().st_size + (
            first / "000001.optim"
        ).stat().st_size
    params = cfg.features * cfg.hidden + cfg.hidden + cfg.hidden * cfg.classes + cfg.classes
    base, with_pot = min(plain), min(recorded)
    return PotOverhead(
        k=k,
        steps=steps,
        parameters=params,
        step_s=base / steps,
        step_with_pot_s=with_pot / steps,
        overhead=(with_pot - base) / base,
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
    *, k: int = 100, steps: int = 1000, repeats: int = 3, attestations: int = 2000
) -> dict[str, object]:
    """Everything `proofnet bench worker` reports, as one JSON-able dict."""
    overhead = measure_pot_overhead(k=k, steps=steps, repeats=repeats)
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
