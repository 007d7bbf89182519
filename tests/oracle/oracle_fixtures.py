"""Shared pieces for the oracle intake tests: an honest job, its escrow and attestation, and
in-memory stand-ins for the API feed and the chain that tests can bend one fact at a time."""

from __future__ import annotations

import dataclasses
import secrets
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from nacl.signing import SigningKey

from chain.contracts import types as t
from oracle.inputs.chain import EscrowLookup, EscrowOutput, StaticChainView
from oracle.inputs.feed import ArtifactMissing, JobInfo, LeaseInfo, WorkerInfo
from oracle.service import escrow_script_hash
from oracle.storage.store import AttestationStore
from oracle.verification.unit_checks import PayableUnit
from oracle.verification.verify import VerificationContext
from proofnet.messages.address import enterprise_address, key_hash
from proofnet.messages.attestation import (
    Attestation,
    AttestationDomain,
    EscrowRef,
    SignedAttestation,
    sign_attestation,
)
from proofnet.messages.binding import PayoutBinding, binding_message
from proofnet.messages.jobspec import JobSpec

NETWORK = "devnet"
NTX_POLICY = "ab" * 28
NTX_NAME = "4e5458"
PRICE = 1_000_000
BUDGET = 1_500_000


def job_spec(*, gpus: int = 1, price: int = PRICE, seed: int | None = None) -> JobSpec:
    return JobSpec.from_dict(
        {
            "model": {"repo_url": "https://example.org/train.git", "commit": "c" * 40},
            "framework": "numpy",
            "image": "python@sha256:" + "d" * 64,
            "commands": [["python", "train.py"]],
            "resources": {
                "gpus": gpus,
                "gpu_memory_mb": 1024 if gpus else 0,
                "cpus": 1,
                "ram_mb": 1024,
                "disk_mb": 1024,
                "max_duration_s": 3600,
            },
            "results": [{"path": "metrics.json", "kind": "json"}],
            "pricing": {"kind": "fixed", "amount": price},
            "seed": secrets.randbelow(2**63) if seed is None else seed,
        }
    )


def escrow_datum(
    job_id: str,
    *,
    budget: int = BUDGET,
    deadline_ms: int | None = None,
    ntx_policy: str = NTX_POLICY,
    ntx_name: str = NTX_NAME,
) -> t.EscrowDatum:
    submitter = SigningKey.generate()
    pkh = key_hash(bytes(submitter.verify_key))
    return t.EscrowDatum(
        batch_credential=b"\x11" * 28,
        job_id=bytes.fromhex(job_id),
        submitter=t.Address(t.PubKeyCredential(pkh), t.NoStakingCredential()),
        submitter_pkh=pkh,
        budget=budget,
        ntx_policy=bytes.fromhex(ntx_policy),
        ntx_name=bytes.fromhex(ntx_name),
        deadline=deadline_ms if deadline_ms is not None else int(time.time() * 1000) + 3_600_000,
        config_policy=b"\x22" * 28,
        config_name=t.CONFIG_NFT_NAME,
        cancel_allowed_until=t.NoPosixTime(),
        nonce=0,
        oracle_set=bytes(32),
    )


def signed_binding(key: SigningKey, payout_address: str) -> PayoutBinding:
    nonce = secrets.token_hex(16)
    pub = bytes(key.verify_key).hex()
    signature = key.sign(binding_message(NETWORK, pub, payout_address, nonce)).signature.hex()
    return PayoutBinding(
        network=NETWORK,
        worker_pubkey=pub,
        payout_address=payout_address,
        nonce=nonce,
        signature=signature,
    )


@dataclass
class FakeFeed:
    """An ApiFeed over dictionaries (the HTTP client is tested against the real API)."""

    jobs: dict[str, JobInfo] = field(default_factory=dict)
    workers: dict[str, WorkerInfo] = field(default_factory=dict)
    artifacts: dict[tuple[str, str], bytes] = field(default_factory=dict)

    def job(self, job_id: str) -> JobInfo | None:
        return self.jobs.get(job_id)

    def worker(self, worker_key: str) -> WorkerInfo | None:
        return self.workers.get(worker_key)

    def artifact(self, job_id: str, name: str) -> bytes:
        try:
            return self.artifacts[(job_id, name)]
        except KeyError:
            raise ArtifactMissing(f"no {name}") from None

    def save_artifact(self, job_id: str, name: str, dest: Path) -> int:
        data = self.artifact(job_id, name)
        dest.write_bytes(data)
        return len(data)


@dataclass
class MemoryStoreView:
    leaves: dict[str, int] = field(default_factory=dict)
    payable: dict[str, tuple[int, str]] = field(default_factory=dict)
    units: dict[str, dict[int, PayableUnit]] = field(default_factory=dict)
    cancelled: dict[str, str] = field(default_factory=dict)

    def holder_of_leaf(self, leaf_hash: str) -> int | None:
        return self.leaves.get(leaf_hash)

    def cancelled_escrow(self, escrow: str) -> str | None:
        return self.cancelled.get(escrow)

    def payable_for_escrow(self, escrow: str) -> tuple[int, str] | None:
        return self.payable.get(escrow)

    def payable_units(self, escrow: str) -> Mapping[int, PayableUnit]:
        return self.units.get(escrow, {})


def escrow_output(
    ref: EscrowRef,
    datum: t.EscrowDatum | None,
    *,
    locked: int = BUDGET,
    script_hash: str | None = None,
    datum_error: str = "",
) -> EscrowOutput:
    return EscrowOutput(
        ref=ref,
        address="addr_test1-escrow",
        payment_script_hash=script_hash or escrow_script_hash(),
        lovelace=5_000_000,
        assets=MappingProxyType({NTX_POLICY + NTX_NAME: locked}),
        datum=datum,
        datum_error=datum_error or ("" if datum else "no inline datum"),
    )


@dataclass
class World:
    """One honest completed job: every fact the oracle checks agrees with the attestation."""

    worker: SigningKey
    spec: JobSpec
    escrow: EscrowRef
    attestation: Attestation
    feed: FakeFeed
    chain: StaticChainView
    store: Any
    nonce: str
    lease: LeaseInfo

    @property
    def job_id(self) -> str:
        return self.spec.job_id

    def context(self, **overrides: Any) -> VerificationContext:
        values: dict[str, Any] = {
            "network": NETWORK,
            "escrow_script_hash": escrow_script_hash(),
            "chain": self.chain,
            "feed": self.feed,
            "store": self.store,
            "ntx_policy": NTX_POLICY,
            "ntx_name": NTX_NAME,
        }
        values.update(overrides)
        return VerificationContext(**values)

    def sign(self, att: Attestation | None = None, key: SigningKey | None = None) -> bytes:
        return sign_attestation(att or self.attestation, key or self.worker).cose

    def signed(self) -> SignedAttestation:
        return sign_attestation(self.attestation, self.worker)

    def variant(self, **changes: Any) -> Attestation:
        """The attestation with fields changed (re-validated)."""
        data = self.attestation.model_dump(mode="python")
        data.update(changes)
        return Attestation.model_validate(data)

    def set_job(self, **changes: Any) -> None:
        self.feed.jobs[self.job_id] = dataclasses.replace(self.feed.jobs[self.job_id], **changes)

    def set_lease(self, **changes: Any) -> None:
        self.set_job(lease=dataclasses.replace(self.lease, **changes))

    def set_escrow(self, lookup: EscrowLookup) -> None:
        self.chain.put(lookup, self.escrow)


def make_world(
    store: AttestationStore | MemoryStoreView | None = None,
    *,
    escrow: EscrowRef | None = None,
    results: Mapping[str, str] | None = None,
    spec: JobSpec | None = None,
    pot_root: str = "0" * 64,
    worker: SigningKey | None = None,
) -> World:
    worker = worker or SigningKey.generate()
    payout = enterprise_address(bytes(SigningKey.generate().verify_key), NETWORK)
    spec = spec or job_spec()
    escrow = escrow or EscrowRef(tx_id=secrets.token_hex(32), index=0)
    now = int(time.time() * 1000)
    nonce = secrets.token_hex(32)
    results = dict(results or {"metrics.json": "e" * 64})
    lease = LeaseInfo(
        worker_key=bytes(worker.verify_key).hex(),
        payout_address=payout,
        nonce=nonce,
        gpus=spec.resources.gpus,
        started_ms=now - 600_000,
        completed_ms=now - 1_000,
        attempt=1,
    )
    att = Attestation(
        domain=AttestationDomain(
            network=NETWORK,
            escrow_script_hash=escrow_script_hash(),
            escrow=escrow,
            job_id=spec.job_id,
        ),
        worker_key=bytes(worker.verify_key).hex(),
        payout_address=payout,
        started_ms=now - 590_000,
        ended_ms=now - 2_000,
        gpu_milliseconds=588_000,
        gpu_model="NVIDIA H100",
        gpu_uuid_sha256="f" * 64,
        image_digest=spec.image_digest,
        command_hash=spec.command_hash,
        result_hashes=results,
        pot_root=pot_root,
        metrics={"loss": "0.25"},
        nonce=nonce,
        amount=PRICE,
    )
    feed = FakeFeed()
    feed.jobs[spec.job_id] = JobInfo(
        job_id=spec.job_id,
        spec=spec,
        status="completed",
        escrow=escrow,
        lease=lease,
        results=MappingProxyType(dict(results)),
    )
    feed.workers[att.worker_key] = WorkerInfo(
        worker_key=att.worker_key,
        payout_address=payout,
        binding=signed_binding(worker, payout),
        network=NETWORK,
    )
    chain = StaticChainView()
    chain.put(EscrowLookup("unspent", escrow_output(escrow, escrow_datum(spec.job_id))), escrow)
    return World(
        worker=worker,
        spec=spec,
        escrow=escrow,
        attestation=att,
        feed=feed,
        chain=chain,
        store=store if store is not None else MemoryStoreView(),
        nonce=nonce,
        lease=lease,
    )


def trainer_repo(path: Path, files: Mapping[str, str], message: str) -> tuple[str, str]:
    """A git repository at `path` holding `files` (a job's trainer modules), committed:
    (file:// URL, commit) as a job spec names its model."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=path,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "-q")
    for name, text in files.items():
        (path / name).write_text(text)
    git("add", ".")
    git("commit", "-q", "-m", message)
    return f"file://{path}", git("rev-parse", "HEAD")
