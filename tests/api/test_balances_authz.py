"""Cross-user authorization: one signed-in user can never read or change another user's
jobs, results, logs, usage, estimates, balances or notification settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from api_support import Wallet, Worker, job_spec, sign_in
from fastapi.testclient import TestClient
from pycardano import Address, Network, StakeSigningKey, VerificationKeyHash
from pycardano.cip import cip8


def test_nobody_reads_another_users_private_data(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    owner_wallet, owner = approved
    intruder_wallet = Wallet()
    intruder = sign_in(client, intruder_wallet)
    client.put(
        "/api/v1/notifications/webhook",
        json={"url": "http://127.0.0.1:9/owner-hook"},
        headers=owner,
    )
    worker = worker_factory()
    worker.register([("NVIDIA A100 80GB", 81920)])
    posted = client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=owner)
    job_id = posted.json()["job_id"]
    lease = worker.claim().json()["lease_token"]
    assert worker.request("POST", f"/api/v1/worker/leases/{lease}/complete", {}).status_code == 200

    job_reads = [
        f"/api/v1/jobs/{job_id}",
        f"/api/v1/jobs/{job_id}/status",
        f"/api/v1/jobs/{job_id}/estimate",
        f"/api/v1/jobs/{job_id}/results",
        f"/api/v1/jobs/{job_id}/results/model.pt",
        f"/api/v1/jobs/{job_id}/logs",
        f"/api/v1/jobs/{job_id}/usage",
    ]
    for path in job_reads:
        # The owner can read it (or it is simply absent, for the result file) ...
        assert client.get(path, headers=owner).status_code in (200, 404), path
        # ... the intruder sees no such job, and anonymous callers must sign in.
        denied = client.get(path, headers=intruder)
        assert denied.status_code == 404, (path, denied.status_code)
        assert "train.py" not in denied.text and "status" not in denied.json()
        assert client.get(path).status_code == 401, path
    assert client.get("/api/v1/jobs", headers=intruder).json()["count"] == 0
    assert client.post(f"/api/v1/jobs/{job_id}/cancel", headers=intruder).status_code == 404

    balance = f"/api/v1/balances/{owner_wallet.address}"
    assert client.get(balance, headers=owner).status_code == 200
    assert client.get(balance, headers=intruder).status_code == 403

    assert client.get("/api/v1/notifications", headers=intruder).json()["webhook"] is None
    assert client.get("/api/v1/notifications/deliveries", headers=intruder).json()["count"] == 0
    assert client.get("/api/v1/notifications/deliveries", headers=owner).json()["count"] == 1
    # The intruder's own webhook never replaces or reveals the owner's.
    mine = client.put(
        "/api/v1/notifications/webhook", json={"url": "https://evil.example/x"}, headers=intruder
    )
    assert mine.status_code == 200
    owner_view = client.get("/api/v1/notifications", headers=owner).json()
    assert owner_view["webhook"]["url"] == "http://127.0.0.1:9/owner-hook"


@dataclass
class StakeWallet(Wallet):
    """A wallet signing in as its stake address: CIP-30 `signData(rewardAddress, ...)`
    signs with the stake key."""

    stake_key: StakeSigningKey = field(default_factory=StakeSigningKey.generate)

    @property
    def stake_hash(self) -> VerificationKeyHash:
        return self.stake_key.to_verification_key().hash()

    @property
    def address(self) -> str:
        return str(Address(staking_part=self.stake_hash, network=Network.TESTNET))

    def sign_data(self, message: str) -> dict[str, str]:
        signed = cip8.sign(message, self.stake_key, attach_cose_key=True, network=Network.TESTNET)
        assert isinstance(signed, dict)
        return {"signature": signed["signature"], "key": signed["key"]}


@dataclass
class BorrowedStakeWallet(Wallet):
    """The attacker: its own payment key, in a base address naming the victim's stake
    credential (anyone can write such an address; only the payment key signs for it)."""

    victim_stake: VerificationKeyHash | None = None

    @property
    def address(self) -> str:
        vk = self.signing_key.to_verification_key()
        return str(Address(vk.hash(), self.victim_stake, network=Network.TESTNET))


def test_a_stake_balance_needs_the_stake_key(client: TestClient) -> None:
    victim = StakeWallet()
    balance = f"/api/v1/balances/{victim.address}"
    # The attack: sign in with one's own payment key under the victim's stake credential.
    attacker = sign_in(client, BorrowedStakeWallet(victim_stake=victim.stake_hash))
    denied = client.get(balance, headers=attacker)
    assert denied.status_code == 403 and "stake key" in denied.json()["detail"]
    # The honest twin: the stake key's owner signs in as the stake address and reads it.
    owner = sign_in(client, victim)
    shown = client.get(balance, headers=owner)
    assert shown.status_code == 200, shown.text
    assert shown.json()["kind"] == "stake"
    # Another stake key cannot sign in as the victim's stake address.
    impostor = StakeWallet()
    challenge = client.post("/api/v1/auth/challenge", json={"address": victim.address}).json()
    signed = impostor.sign_data(challenge["message"])
    verify = client.post(
        "/api/v1/auth/verify",
        json={"address": victim.address, "nonce": challenge["nonce"], **signed},
    )
    assert verify.status_code == 401
    # Nor can a payment key (the header names a payment address, not the stake address).
    challenge = client.post("/api/v1/auth/challenge", json={"address": victim.address}).json()
    signed = Wallet().sign_data(challenge["message"])
    verify = client.post(
        "/api/v1/auth/verify",
        json={"address": victim.address, "nonce": challenge["nonce"], **signed},
    )
    assert verify.status_code == 401
