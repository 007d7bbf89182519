"""Helpers for the API tests: wallets that sign like CIP-30, signed workers, job specs."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from nacl.signing import SigningKey
from pycardano import Address, Network, PaymentSigningKey
from pycardano.cip import cip8

from proofnet.messages.binding import binding_message
from proofnet.messages.worker_auth import sign_request_headers

NETWORK = "devnet"


class FakeClock:
    """A settable clock for the app: tests move time instead of sleeping."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Wallet:
    """A CIP-30 wallet stand-in: a payment key and its enterprise testnet address."""

    signing_key: PaymentSigningKey = field(default_factory=PaymentSigningKey.generate)

    @property
    def address(self) -> str:
        vk = self.signing_key.to_verification_key()
        return str(Address(vk.hash(), network=Network.TESTNET))

    def sign_data(self, message: str) -> dict[str, str]:
        """What a CIP-30 wallet's `signData` returns: COSE_Sign1 hex + COSE_Key hex."""
        signed = cip8.sign(message, self.signing_key, attach_cose_key=True, network=Network.TESTNET)
        assert isinstance(signed, dict)
        return {"signature": signed["signature"], "key": signed["key"]}


def sign_in(client: TestClient, wallet: Wallet) -> dict[str, str]:
    """Sign in through the API; returns the Authorization header."""
    challenge = client.post("/api/v1/auth/challenge", json={"address": wallet.address})
    assert challenge.status_code == 200, challenge.text
    body = challenge.json()
    verify = client.post(
        "/api/v1/auth/verify",
        json={
            "address": wallet.address,
            "nonce": body["nonce"],
            **wallet.sign_data(body["message"]),
        },
    )
    assert verify.status_code == 200, verify.text
    return {"Authorization": f"Bearer {verify.json()['access_token']}"}


@dataclass
class Worker:
    """A worker with its Ed25519 key, signing every request the way the API requires."""

    client: TestClient
    key: SigningKey = field(default_factory=SigningKey.generate)
    clock: FakeClock | None = None

    @property
    def public_key(self) -> str:
        return bytes(self.key.verify_key).hex()

    def request(self, method: str, path: str, body: Any = None, **headers: str) -> Any:
        raw = b"" if body is None else json.dumps(body).encode()
        now = self.clock() if self.clock else datetime.now(UTC)
        signed = sign_request_headers(
            self.key,
            network=NETWORK,
            method=method,
            path=path,
            body=raw,
            timestamp=int(now.timestamp()),
            nonce=secrets.token_hex(16),
        )
        signed.update(headers)
        if raw:
            signed["content-type"] = "application/json"
        return self.client.request(method, path, content=raw, headers=signed)

    def register(
        self,
        gpus: list[tuple[str, int]],
        payout: Wallet | None = None,
        report: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Register with `gpus` as (model, memory MB) pairs; `report` builds the onboarding
        report from the offered GPUs (default: `capabilities`, a clean one)."""
        challenge = self.request("POST", "/api/v1/worker/challenge")
        assert challenge.status_code == 200, challenge.text
        nonce = challenge.json()["nonce"]
        payout_address = (payout or Wallet()).address
        signature = self.key.sign(
            binding_message(NETWORK, self.public_key, payout_address, nonce)
        ).signature.hex()
        binding = {
            "network": NETWORK,
            "worker_pubkey": self.public_key,
            "payout_address": payout_address,
            "nonce": nonce,
            "signature": signature,
        }
        offered = [
            {"index": i, "uuid": f"GPU-{secrets.token_hex(8)}", "name": m, "memory_mb": mb}
            for i, (m, mb) in enumerate(gpus)
        ]
        body = {
            "binding": binding,
            "gpus": offered,
            "capabilities": (report or capabilities)(offered),
        }
        response = self.request("POST", "/api/v1/worker/register", body)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def claim(self, *, cluster: bool = True, egress: bool = False) -> Any:
        """Claim as a current worker does: saying whether it runs cluster nodes and whether
        its provider allows jobs network egress."""
        accepts = {"cluster": cluster, "egress": egress}
        return self.request("POST", "/api/v1/worker/claim", {"accepts": accepts})


def capabilities(offered: list[dict[str, Any]]) -> dict[str, Any]:
    """A minimal onboarding report (proofnet.messages.registration) backing `offered`."""
    return {
        "worker_version": "0.1.0",
        "cpu_only": not offered,
        "cpu_only_reason": None if offered else "no NVIDIA driver",
        "driver_version": "550.54" if offered else None,
        "cuda_version": "12.4" if offered else None,
        "gpus": [
            {
                "index": g["index"],
                "uuid": g["uuid"],
                "compute_capability": "8.9",
                "pci_bus_id": f"00000000:0{g['index']}:00.0",
                "memory_total_bytes": g["memory_mb"] * 2**20,
            }
            for g in offered
        ],
        "host": {
            "os": "Linux",
            "kernel": "6.1",
            "arch": "x86_64",
            "cpu_model": "test",
            "cpu_count": 8,
            "ram_total_bytes": 2**35,
            "disk_free_bytes": 2**40,
            "python": "3.11",
        },
        "runtime_check": {"status": "ok", "problem": "", "diagnosis": ""},
        "challenge_seed_source": "api-nonce",
        "challenges": [],
    }


def job_spec(
    *, gpus: int = 1, gpu_memory_mb: int = 16384, seed: int | None = None
) -> dict[str, Any]:
    return {
        "model": {"repo_url": "https://github.com/example/train", "commit": "a" * 40},
        "framework": "pytorch",
        "image": "pytorch/pytorch@sha256:" + "b" * 64,
        "commands": [["python", "train.py", "--epochs", "1"]],
        "resources": {
            "gpus": gpus,
            "gpu_memory_mb": gpu_memory_mb if gpus else 0,
            "cpus": 4,
            "ram_mb": 16000,
            "disk_mb": 50000,
            "max_duration_s": 3600,
        },
        "pricing": {"kind": "fixed", "amount": 1_000_000},
        "seed": secrets.randbelow(2**63) if seed is None else seed,
    }


def wait_for(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


# The oracle every test config trusts by default (conftest `make_config`): results reach the
# submitter only with a releasing verdict of a trusted oracle (api.services.result_release).
RELEASE_ORACLE = SigningKey.generate()


def lease_nonces(client: TestClient, job_id: str) -> list[str]:
    """The nonces of the job's leases, oldest first (what their attestations name)."""
    from sqlmodel import Session, col, select

    from api.models import Job, Lease

    with Session(client.app.state.engine) as session:  # type: ignore[attr-defined]
        job = session.exec(select(Job).where(Job.job_id == job_id)).one()
        leases = session.exec(
            select(Lease).where(Lease.job_id == job.id).order_by(col(Lease.id))
        ).all()
        assert leases, f"job {job_id} has no lease"
        return list(dict.fromkeys(lease.nonce for lease in leases))


def newest_nonce(client: TestClient, job_id: str) -> str:
    """The nonce of the job's newest lease."""
    return lease_nonces(client, job_id)[-1]


def post_verdict(
    client: TestClient,
    job_id: str,
    *,
    nonce: str | None = None,
    status: str = "verified",
    fault: str | None = None,
    key: SigningKey = RELEASE_ORACLE,
    reason: str = "",
) -> Any:
    """Post an oracle's verdict on the attestation of lease `nonce` (default: the newest),
    signed by `key` the way an oracle signs its requests."""
    clock = getattr(client.app.state, "clock", None)  # type: ignore[attr-defined]
    oracle = Worker(client, key, clock if isinstance(clock, FakeClock) else None)
    body = {
        "job_id": job_id,
        "nonce": nonce or newest_nonce(client, job_id),
        "status": status,
        "fault": fault,
        "reason": reason,
    }
    return oracle.request("POST", "/api/v1/oracle/verdicts", body)


def release_results(client: TestClient, job_id: str, **kwargs: Any) -> None:
    """The trusted oracle verifies the job's newest lease: its results are released."""
    posted = post_verdict(client, job_id, **kwargs)
    assert posted.status_code == 200, posted.text
    assert posted.json()["state"] == "released", posted.text


def release_every_lease(client: TestClient, job_id: str) -> None:
    """The trusted oracle verifies every lease of the job (each unit's, for a topology)."""
    for nonce in lease_nonces(client, job_id):
        post_verdict(client, job_id, nonce=nonce)
