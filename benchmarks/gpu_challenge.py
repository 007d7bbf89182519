"""The GPU challenge round's costs outside the matrix multiply (`proofnet bench gpu-challenge`).

The API judges a GPU by the time from the round's start to the commitment on its own clock,
against the claimed model's minimum plausible throughput plus an allowance
(`gpu_challenge_overhead_s`) for what is not the product: hashing C into the row commitment
on the worker, and the round trips. Deriving A and B from the seed happens before the clock
starts. This measures both on this machine's CPU (the worker does them on its host CPU
whatever its GPU), and what the API spends checking the revealed rows, beside the time the
allowance grants, so the default can be read against figures. The product itself needs a GPU: `scripts/device_check.sh` times whole rounds there.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass

import numpy as np

from api.config import ApiConfig
from api.services.gpu_challenges import allowed_seconds, min_tflops
from proofnet.messages.gpu_challenge import challenge_matrices, check_revealed_rows
from proofnet.messages.registration import InclusionProofReport, RevealedRowReport
from worker.challenge import commitment_tree


@dataclass(frozen=True)
class ChallengeCosts:
    n: int
    generate_s: float  # A and B from the seed (worker, untimed; API, in its check)
    commit_s: float  # Merkle root over the rows of C (int64 leaves), inside the clock
    api_check_s: float  # the API's check of the revealed rows (generation included)
    h100_compute_s: float  # the product at the H100's minimum plausible throughput
    h100_allowed_s: float  # what the API allows an H100 from seed to commitment


def measure(n: int, rows: int = 4) -> ChallengeCosts:
    seed = secrets.randbelow(2**63)
    t0 = time.perf_counter()
    challenge_matrices(seed, n)
    generate_s = time.perf_counter() - t0
    # Hashing cost does not depend on the values: a C of the right shape and range stands in
    # for the product (which on this CPU would take minutes).
    c = np.random.default_rng(0).integers(-64 * n, 64 * n, size=(n, n), dtype=np.int64)
    t0 = time.perf_counter()
    tree = commitment_tree(c)
    commit_s = time.perf_counter() - t0
    picks = sorted(secrets.SystemRandom().sample(range(n), rows))
    revealed = []
    for i in picks:
        proof = tree.proof(i)
        revealed.append(
            RevealedRowReport(
                index=i,
                values=[int(v) for v in c[i]],
                proof=InclusionProofReport(
                    index=proof.index, size=proof.size, path=[h.hex() for h in proof.path]
                ),
            )
        )
    t0 = time.perf_counter()
    # The stand-in C fails Freivalds' first round: the same work as a pass, minus one round.
    check_revealed_rows(
        seed, n, secrets.token_hex(32), tree.root.hex(), picks, revealed, secrets.token_bytes(32)
    )
    api_check_s = time.perf_counter() - t0
    config = ApiConfig(database_url="sqlite://", network="devnet")
    model = "NVIDIA H100 80GB HBM3"
    return ChallengeCosts(
        n=n,
        generate_s=generate_s,
        commit_s=commit_s,
        api_check_s=api_check_s,
        h100_compute_s=2 * n**3 / (min_tflops(model) * 1e12),
        h100_allowed_s=allowed_seconds(config, model, n),
    )


def run_gpu_challenge_bench(sizes: list[int]) -> list[dict[str, float]]:
    return [asdict(measure(n)) for n in sizes]
