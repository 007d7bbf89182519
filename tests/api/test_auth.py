"""Wallet sign-in: a CIP-8 signature over a fresh, single-use challenge buys a bearer token."""

from __future__ import annotations

from typing import Any

from api_support import FakeClock, Wallet, sign_in
from fastapi.testclient import TestClient
from pycardano import Address, Network, PaymentSigningKey, StakeSigningKey
from pycardano.cip import cip8


def _challenge(client: TestClient, wallet: Wallet) -> dict[str, Any]:
    response = client.post("/api/v1/auth/challenge", json={"address": wallet.address})
    assert response.status_code == 200, response.text
    return dict(response.json())


def _verify(client: TestClient, address: str, nonce: str, signed: dict[str, str]) -> Any:
    return client.post("/api/v1/auth/verify", json={"address": address, "nonce": nonce, **signed})


def test_valid_cip8_signature_signs_in(client: TestClient) -> None:
    wallet = Wallet()
    challenge = _challenge(client, wallet)
    assert challenge["nonce"] in challenge["message"]
    assert wallet.address in challenge["message"]
    assert challenge["message"].startswith("proofnet sign-in v1\n")
    response = _verify(
        client, wallet.address, challenge["nonce"], wallet.sign_data(challenge["message"])
    )
    assert response.status_code == 200, response.text
    token = response.json()["access_token"]
    me = client.get("/api/v1/users/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200
    assert me.json()["address"] == wallet.address
    assert me.json()["is_approved"] is False


def test_base_address_with_stake_part_signs_in(client: TestClient) -> None:
    payment = PaymentSigningKey.generate()
    stake = StakeSigningKey.generate()
    address = str(
        Address(
            payment.to_verification_key().hash(),
            stake.to_verification_key().hash(),
            network=Network.TESTNET,
        )
    )
    response = client.post("/api/v1/auth/challenge", json={"address": address})
    challenge = response.json()
    signed = cip8.sign(challenge["message"], payment, attach_cose_key=True, network=Network.TESTNET)
    assert isinstance(signed, dict)
    ok = _verify(client, address, challenge["nonce"], signed)
    assert ok.status_code == 200, ok.text


def test_wrong_key_is_rejected(client: TestClient) -> None:
    wallet, impostor = Wallet(), Wallet()
    challenge = _challenge(client, wallet)
    # A perfectly valid signature over the right message, by a key the address does not name.
    response = _verify(
        client, wallet.address, challenge["nonce"], impostor.sign_data(challenge["message"])
    )
    assert response.status_code == 401
    assert "payment credential" in response.json()["detail"]


def test_stake_key_signature_is_rejected(client: TestClient) -> None:
    wallet = Wallet()
    challenge = _challenge(client, wallet)
    stake = StakeSigningKey.generate()
    signed = cip8.sign(challenge["message"], stake, attach_cose_key=True, network=Network.TESTNET)
    assert isinstance(signed, dict)
    response = _verify(client, wallet.address, challenge["nonce"], signed)
    assert response.status_code == 401


def test_replayed_nonce_is_rejected(client: TestClient) -> None:
    wallet = Wallet()
    challenge = _challenge(client, wallet)
    signed = wallet.sign_data(challenge["message"])
    assert _verify(client, wallet.address, challenge["nonce"], signed).status_code == 200
    replay = _verify(client, wallet.address, challenge["nonce"], signed)
    assert replay.status_code == 401
    assert "already used" in replay.json()["detail"]


def test_expired_nonce_is_rejected(client: TestClient, clock: FakeClock) -> None:
    wallet = Wallet()
    challenge = _challenge(client, wallet)
    clock.advance(301)  # challenge_ttl_s is 300
    response = _verify(
        client, wallet.address, challenge["nonce"], wallet.sign_data(challenge["message"])
    )
    assert response.status_code == 401
    assert "expired" in response.json()["detail"]


def test_tampered_message_is_rejected(client: TestClient) -> None:
    wallet = Wallet()
    challenge = _challenge(client, wallet)
    tampered = challenge["message"].replace("network: devnet", "network: mainnet")
    assert tampered != challenge["message"]
    response = _verify(client, wallet.address, challenge["nonce"], wallet.sign_data(tampered))
    assert response.status_code == 401
    assert "not the challenge" in response.json()["detail"]


def test_tampered_signature_bytes_are_rejected(client: TestClient) -> None:
    wallet = Wallet()
    challenge = _challenge(client, wallet)
    signed = wallet.sign_data(challenge["message"])
    sig = signed["signature"]
    # Flip one bit of the Ed25519 signature (the last bytes of the COSE_Sign1).
    flipped = sig[:-2] + f"{int(sig[-2:], 16) ^ 1:02x}"
    response = _verify(
        client, wallet.address, challenge["nonce"], {"signature": flipped, "key": signed["key"]}
    )
    assert response.status_code == 401


def test_nonce_of_another_address_is_rejected(client: TestClient) -> None:
    alice, mallory = Wallet(), Wallet()
    challenge = _challenge(client, alice)
    response = _verify(
        client, mallory.address, challenge["nonce"], mallory.sign_data(challenge["message"])
    )
    assert response.status_code == 401


def test_failed_attempt_burns_the_nonce(client: TestClient) -> None:
    wallet = Wallet()
    challenge = _challenge(client, wallet)
    bad = _verify(
        client, wallet.address, challenge["nonce"], Wallet().sign_data(challenge["message"])
    )
    assert bad.status_code == 401
    good = _verify(
        client, wallet.address, challenge["nonce"], wallet.sign_data(challenge["message"])
    )
    assert good.status_code == 401


def test_garbage_signature_is_a_clear_401(client: TestClient) -> None:
    wallet = Wallet()
    challenge = _challenge(client, wallet)
    response = _verify(
        client, wallet.address, challenge["nonce"], {"signature": "abcd", "key": "00"}
    )
    assert response.status_code == 401
    assert "malformed" in response.json()["detail"]


def test_bad_addresses_are_refused(client: TestClient) -> None:
    mainnet = str(
        Address(PaymentSigningKey.generate().to_verification_key().hash(), network=Network.MAINNET)
    )
    for address, fragment in [
        ("addr_test1notanaddressatall000000000", "not a valid"),
        (mainnet, "this API runs devnet"),
    ]:
        response = client.post("/api/v1/auth/challenge", json={"address": address})
        assert response.status_code == 400, address
        assert fragment in response.json()["detail"]


def test_token_expiry_and_logout(client: TestClient, clock: FakeClock) -> None:
    wallet = Wallet()
    headers = sign_in(client, wallet)
    assert client.get("/api/v1/users/me", headers=headers).status_code == 200
    assert client.post("/api/v1/auth/logout", headers=headers).status_code == 200
    assert client.get("/api/v1/users/me", headers=headers).status_code == 401
    headers = sign_in(client, wallet)
    clock.advance(24 * 3600 + 1)
    expired = client.get("/api/v1/users/me", headers=headers)
    assert expired.status_code == 401
    assert "expired" in expired.json()["detail"]


def test_no_or_bad_token_is_401(client: TestClient) -> None:
    assert client.get("/api/v1/users/me").status_code == 401
    bad = client.get("/api/v1/users/me", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401


def test_tokens_are_stored_hashed(client: TestClient, session: Any) -> None:
    from sqlmodel import select

    from api.models import ApiToken

    headers = sign_in(client, Wallet())
    token = headers["Authorization"].split()[1]
    stored = session.exec(select(ApiToken)).all()
    assert len(stored) == 1
    assert token not in stored[0].token_hash
    assert len(stored[0].token_hash) == 64
