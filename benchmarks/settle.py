"""`proofnet bench settle`: how many escrows one batch transaction settles, and at what fee.

Runs a private devnet (default protocol parameters), deploys the protocol with the
project's builders, locks escrows and lets `pack_settle_batch` find, by evaluating real
transactions, the largest batch that fits; that batch is then SUBMITTED and must be
accepted. Two shapes:

(a) distinct: every escrow has its own submitter and its own provider, pays part of its
    budget and returns the rest (a payout and an NTX remainder output each);
(b) aggregated: payouts rotate over 10 providers and spend the whole budget (no NTX
    remainder; the contract still requires each escrow's ADA remainder output).

The baseline is the fee of settling one escrow in its own transaction.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pycardano import Address, Network, PaymentSigningKey, StakeSigningKey, UTxO

from chain.devnet.profiles import DEFAULT_PROFILE, profile_params
from chain.offchain.builders import assembly as A
from chain.offchain.builders.chain_time import tip_posix_ms
from chain.offchain.builders.deploy import OracleSetup, deploy
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.lock import EscrowJob, lock_escrows
from chain.offchain.builders.mint import mint_test_ntx
from chain.offchain.builders.settle import BatchTx, Settlement, binding_limit, pack_settle_batch
from chain.offchain.builders.wallet import KeyWallet, await_output
from chain.offchain.measure import memory_breakdown

# More than fit (about 55 distinct settlements at the size limit), so a limit binds.
CANDIDATES = 80
LOCKS_PER_TX = 20
BUDGET = 1_000
AGGREGATED_PROVIDERS = 10
DEADLINE_MS = 3_600_000


def _wallet(tag: str, staked: bool = False) -> KeyWallet:
    def key(kind: str) -> bytes:
        return hashlib.blake2b(f"bench-{kind}-{tag}".encode(), digest_size=32).digest()

    stake = StakeSigningKey.from_primitive(key("stake")) if staked else None
    return KeyWallet(PaymentSigningKey.from_primitive(key("pay")), Network.TESTNET, stake)


def _lock_many(
    devnet: Any, context: Any, deployment: Deployment, funder: KeyWallet, jobs: Sequence[EscrowJob]
) -> list[UTxO]:
    escrows: list[UTxO] = []
    for start in range(0, len(jobs), LOCKS_PER_TX):
        result = lock_escrows(context, deployment, jobs[start : start + LOCKS_PER_TX], funder)
        devnet.wait_for_tx(result.tx_id)
        found = [
            u
            for u in context.utxos(deployment.escrow_address)
            if str(u.input.transaction_id) == result.tx_id
        ]
        escrows.extend(sorted(found, key=lambda u: u.input.index))
    return escrows


def _jobs(context: Any, submitters: Sequence[Address], tag: str) -> list[EscrowJob]:
    now = tip_posix_ms(context)
    return [
        EscrowJob(
            job_id=hashlib.blake2b(f"{tag}-{i}".encode(), digest_size=32).digest(),
            budget=BUDGET,
            deadline=now + DEADLINE_MS,
            submitter=s,
            nonce=i,
        )
        for i, s in enumerate(submitters)
    ]


def _settle(
    devnet: Any,
    context: Any,
    deployment: Deployment,
    candidates: Sequence[Settlement],
    oracles: Sequence[KeyWallet],
    batch_id: bytes,
) -> BatchTx:
    payer = oracles[0]
    batch = pack_settle_batch(
        context,
        deployment,
        candidates,
        hashlib.sha256(batch_id).digest(),
        batch_id,
        [o.pkh for o in oracles],
        payer.address,
    )
    tx_id = A.submit(context, A.sign(batch.built, [o.signing_key for o in oracles]))
    devnet.wait_for_tx(tx_id)
    return batch


def run_settle_bench(
    json_out: bool, *, candidates: int = CANDIDATES, profile: str = DEFAULT_PROFILE
) -> dict[str, Any]:
    """Measure on a fresh devnet with the parameters of `profile`; print one JSON line
    (`json_out`) or a table. With fewer `candidates` than fit, the counts are lower bounds
    and `binding_limit` says so. `memory_per_settlement` says where the memory of one
    more settlement goes (`chain.offchain.measure.memory_breakdown`, offline)."""
    if candidates < 2:
        raise ValueError("the bench needs at least 2 candidate escrows per case")
    profile_params(profile)  # an unknown profile fails before the devnet starts
    from chain.devnet.testing import running_devnet

    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="proofnet-bench-settle-") as tmp,
        running_devnet(Path(tmp), block_time=0.2, enable_faults=False, profile=profile) as devnet,
    ):
        context = devnet.chain_context()
        admin, funder = _wallet("admin"), _wallet("funder")
        oracles = sorted((_wallet(f"oracle{i}") for i in range(3)), key=lambda w: w.pkh.payload)
        quorum = oracles[:2]
        for w in (admin, funder, *quorum):
            devnet.wait_for_tx(devnet.fund(str(w.address), lovelace=5_000_000_000))
        tx_id, minted = mint_test_ntx(context, admin, funder.address, 10**9)
        await_output(context, funder.address, tx_id)
        setup = OracleSetup(tuple(o.pkh for o in oracles), 2, (admin.pkh,), 1)
        deployment = deploy(context, admin, setup, minted.policy_id, minted.asset_name)

        submitters = [_wallet(f"submitter{i}", staked=True).address for i in range(candidates)]
        providers = [_wallet(f"provider{i}", staked=True).address for i in range(candidates)]
        distinct = _lock_many(devnet, context, deployment, funder, _jobs(context, submitters, "a"))
        aggregated = _lock_many(
            devnet, context, deployment, funder, _jobs(context, submitters, "b")
        )
        (single,) = _lock_many(
            devnet, context, deployment, funder, _jobs(context, submitters[:1], "c")
        )

        case_a = _settle(
            devnet,
            context,
            deployment,
            [Settlement(e, ((providers[i], BUDGET * 3 // 5),)) for i, e in enumerate(distinct)],
            quorum,
            b"bench-distinct",
        )
        case_b = _settle(
            devnet,
            context,
            deployment,
            [
                Settlement(e, ((providers[i % AGGREGATED_PROVIDERS], BUDGET),))
                for i, e in enumerate(aggregated)
            ],
            quorum,
            b"bench-aggregated",
        )
        baseline = _settle(
            devnet,
            context,
            deployment,
            [Settlement(single, ((providers[0], BUDGET * 3 // 5),))],
            quorum,
            b"bench-baseline",
        )
        a, b = case_a.built, case_b.built
        n_a, n_b = len(case_a.settled), len(case_b.settled)
        report: dict[str, Any] = {
            "max_settlements_per_tx_distinct": n_a,
            "max_settlements_per_tx_aggregated": n_b,
            "fee_per_settlement_lovelace": a.fee // n_a,
            "baseline_fee_lovelace": baseline.built.fee,
            "tx_size_bytes": a.size,
            "mem_units": a.mem,
            "steps": a.steps,
            "binding_limit": binding_limit(context, a) if case_a.left_out else "candidates",
            "aggregated_fee_per_settlement_lovelace": b.fee // n_b,
            "aggregated_binding_limit": (
                binding_limit(context, b) if case_b.left_out else "candidates"
            ),
            "aggregated_tx_size_bytes": b.size,
            "aggregated_mem_units": b.mem,
            "aggregated_steps": b.steps,
            "limits": {
                "max_tx_size": int(context.protocol_param.max_tx_size),
                "max_tx_ex_mem": int(context.protocol_param.max_tx_ex_mem),
                "max_tx_ex_steps": int(context.protocol_param.max_tx_ex_steps),
            },
            "tx_ids": {
                "distinct": case_a.tx_id,
                "aggregated": case_b.tx_id,
                "baseline": baseline.tx_id,
            },
            "profile": profile,
            "wall_s": round(time.monotonic() - started, 1),
        }
    report["memory_per_settlement"] = memory_breakdown()
    if json_out:
        print(json.dumps(report, sort_keys=True))
    else:
        _print_table(report)
    return report


def _print_table(report: dict[str, Any]) -> None:
    width = max(len(k) for k in report)
    for key, value in report.items():
        print(f"{key.ljust(width)}  {value}")
