"""A settlement scenario on a devnet: deploy the protocol with N oracle keys, lock escrows
of faucet-minted NTX, sign worker attestations against them and store them as verified.

Shared by the devnet tests, `proofnet chaos oracle` and the latency bench; the devnet is
reached only over HTTP (its Blockfrost API and its admin endpoints), so it may run in this
process or as a child process.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
from pycardano import Address, BlockFrostChainContext, Network, PaymentSigningKey
from sqlalchemy.engine import Engine
from sqlmodel import Session
from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_delay, wait_fixed

from chain.offchain.builders.deploy import OracleSetup, deploy
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.lock import EscrowJob, lock_escrows
from chain.offchain.builders.wallet import KeyWallet, await_output
from oracle.models import VERIFIED, AttestationRecord, escrow_ref, payable_key
from proofnet.messages.attestation import (
    Attestation,
    AttestationDomain,
    EscrowRef,
    SignedAttestation,
    sign_attestation,
)

from .ports import OutRef

NTX_NAME = b"NTX"
# The devnet evaluates the real scripts with uplc, which recurses once per term: threads
# that evaluate need a deep Python stack and a large C stack.


def seeded_key(tag: str) -> PaymentSigningKey:
    """A deterministic key for devnet roles (never for real funds)."""
    return PaymentSigningKey(hashlib.sha256(f"proofnet-devnet/{tag}".encode()).digest())


def enterprise(key: PaymentSigningKey) -> Address:
    return Address(key.to_verification_key().hash(), network=Network.TESTNET)


@dataclass
class Devnet:
    """The devnet's HTTP endpoints (`url` ends in /api/v0)."""

    url: str
    admin_token: str | None = None

    def context(self) -> BlockFrostChainContext:
        return BlockFrostChainContext(project_id="devnet", base_url=self.url[: -len("/v0")])

    def admin(self, path: str, payload: dict[str, object] | None = None) -> dict[str, object]:
        headers = {"Authorization": f"Bearer {self.admin_token}"} if self.admin_token else {}
        response = httpx.post(
            f"{self.url}/admin/{path}", json=payload or {}, headers=headers, timeout=60
        )
        if response.status_code != 200:
            raise RuntimeError(f"admin/{path}: {response.status_code} {response.text[:300]}")
        return dict(response.json())

    def fund(self, address: Address, lovelace: int, ntx: int = 0) -> str:
        assets = {NTX_NAME.hex(): ntx} if ntx else {}
        body = self.admin("fund", {"address": str(address), "lovelace": lovelace, "assets": assets})
        return str(body["tx_hash"])

    def faucet_policy(self) -> str:
        return str(httpx.get(f"{self.url}/admin/status", timeout=30).json()["faucet_policy_id"])

    def wait_for_tx(self, tx_id: str, timeout: float = 60.0) -> None:
        def timed_out(_state: RetryCallState) -> bool:
            raise TimeoutError(f"{tx_id} not confirmed in {timeout}s")

        Retrying(
            stop=stop_after_delay(timeout),
            wait=wait_fixed(0.05),
            retry=retry_if_result(lambda confirmed: not confirmed),
            retry_error_callback=timed_out,
        )(lambda: httpx.get(f"{self.url}/txs/{tx_id}", timeout=30).status_code == 200)


@dataclass
class Scenario:
    devnet: Devnet
    deployment: Deployment
    oracle_keys: tuple[PaymentSigningKey, ...]
    submitter: KeyWallet
    ntx_policy: str

    @property
    def oracle_pkhs(self) -> list[bytes]:
        return [k.to_verification_key().hash().payload for k in self.oracle_keys]


def setup(
    devnet: Devnet,
    *,
    oracles: int = 1,
    threshold: int = 1,
    tag: str = "scenario",
    submitter_ntx: int = 10_000_000,
) -> Scenario:
    """Deploy with `oracles` keys (threshold `threshold`), fund the oracles (fees and
    collateral) and a submitter (ADA + NTX from the faucet)."""
    context = devnet.context()
    keys = tuple(seeded_key(f"{tag}/oracle-{i}") for i in range(oracles))
    admin = KeyWallet(seeded_key(f"{tag}/admin"))
    submitter = KeyWallet(seeded_key(f"{tag}/submitter"))
    policy = devnet.faucet_policy()
    funding = [devnet.fund(admin.address, 200_000_000)]
    funding += [devnet.fund(submitter.address, 500_000_000, submitter_ntx)]
    for key in keys:
        # Several UTxOs: collateral and fees never wait on a change output.
        funding += [devnet.fund(enterprise(key), 100_000_000) for _ in range(2)]
    for tx in funding:
        devnet.wait_for_tx(tx)
    setup_ = OracleSetup(
        oracles=tuple(k.to_verification_key().hash() for k in keys),
        threshold=threshold,
        admins=(admin.pkh,),
        admin_threshold=1,
    )
    deployment = deploy(context, admin, setup_, bytes.fromhex(policy), NTX_NAME)
    return Scenario(devnet, deployment, keys, submitter, policy)


def lock(
    scenario: Scenario,
    count: int,
    *,
    budget: int = 1_000,
    deadline_ms: int | None = None,
    nonce_base: int = 0,
    job_ids: Sequence[bytes] = (),
) -> list[tuple[OutRef, bytes]]:
    """Lock `count` escrows in one transaction; returns (out-ref, job id) per escrow. The
    job ids are `job_ids` (for escrows of real job specs), else made up."""
    context = scenario.devnet.context()
    deadline = deadline_ms or int(time.time() * 1000) + 3_600_000
    if job_ids and len(job_ids) != count:
        raise ValueError(f"{len(job_ids)} job ids for {count} escrows")
    jobs = [
        EscrowJob(
            job_id=job_ids[i]
            if job_ids
            else hashlib.sha256(f"job/{nonce_base + i}/{time.time_ns()}".encode()).digest(),
            budget=budget,
            deadline=deadline,
            submitter=scenario.submitter.address,
            nonce=nonce_base + i,
        )
        for i in range(count)
    ]
    result = lock_escrows(context, scenario.deployment, jobs, scenario.submitter)
    await_output(context, scenario.deployment.escrow_address, result.tx_id)
    return [(OutRef.parse(r), j.job_id) for r, j in zip(result.escrow_refs, jobs, strict=True)]


def worker_key(index: int) -> PaymentSigningKey:
    return seeded_key(f"worker-{index}")


def attestation(
    scenario: Scenario, escrow: OutRef, job_id: bytes, amount: int, worker: PaymentSigningKey
) -> SignedAttestation:
    vk = bytes(worker.to_verification_key().payload)
    now = int(time.time() * 1000)
    att = Attestation(
        domain=AttestationDomain(
            network="devnet",
            escrow_script_hash=scenario.deployment.escrow_hash,
            escrow=EscrowRef(tx_id=escrow.tx_id, index=escrow.index),
            job_id=job_id.hex(),
        ),
        worker_key=vk.hex(),
        payout_address=str(enterprise(worker)),
        started_ms=now - 60_000,
        ended_ms=now,
        gpu_milliseconds=60_000,
        gpu_model="NVIDIA H200",
        gpu_uuid_sha256=hashlib.sha256(b"gpu").hexdigest(),
        image_digest="sha256:" + hashlib.sha256(b"image").hexdigest(),
        command_hash=hashlib.sha256(b"train").hexdigest(),
        result_hashes={"model.pt": hashlib.sha256(job_id).hexdigest()},
        pot_root=hashlib.sha256(b"pot" + job_id).hexdigest(),
        metrics={"loss": "0.125"},
        nonce=hashlib.sha256(job_id + escrow.tx_id.encode()).hexdigest()[:32],
        amount=amount,
    )
    return sign_attestation(att, bytes(worker.payload))


def store_verified(engine: Engine, signed: SignedAttestation) -> int:
    """Store an attestation as verified, as the intake does after its checks pass."""
    att = signed.attestation
    ref = att.domain.escrow
    unit = None if att.unit is None else att.unit.index
    attempt = None if att.segments is None else att.segments.attempt
    stamp = datetime.now(UTC)
    row = AttestationRecord(
        job_id=att.job_id,
        escrow_tx_id=ref.tx_id,
        escrow_index=ref.index,
        escrow_ref=escrow_ref(ref.tx_id, ref.index),
        payable_escrow=payable_key(escrow_ref(ref.tx_id, ref.index), unit, attempt),
        unit_index=unit,
        attempt=attempt,
        unit_output=None if att.unit is None else att.unit.output,
        worker_key=att.worker_key,
        payout_address=att.payout_address,
        amount=att.amount,
        cose=signed.cose,
        leaf_hash=att.leaf_hash().hex(),
        status=VERIFIED,
        received_at=stamp,
        updated_at=stamp,
    )
    with Session(engine) as session:
        session.add(row)
        session.commit()
        assert row.id is not None
        return row.id


def attested_escrows(
    scenario: Scenario,
    engine: Engine,
    escrows: Sequence[tuple[OutRef, bytes]],
    amount: int,
    first_worker: int = 0,
) -> dict[str, tuple[int, str, int]]:
    """Sign and store one attestation per escrow; escrow -> (id, payout address, amount).
    Workers (and payout addresses) repeat every 7 attestations, from `first_worker`: runs
    on one chain that count payouts per address start where the last one stopped."""
    out: dict[str, tuple[int, str, int]] = {}
    for i, (ref, job) in enumerate(escrows):
        signed = attestation(scenario, ref, job, amount + i, worker_key((first_worker + i) % 7))
        out[str(ref)] = (
            store_verified(engine, signed),
            signed.attestation.payout_address,
            amount + i,
        )
    return out
