"""Attestations: COSE_Sign1 round trip, tamper and replay rejection, CIP-8 interop."""

from __future__ import annotations

import json
from typing import Any

import cbor2
import pytest
from nacl.signing import SigningKey

from proofnet.messages.address import (
    AddressError,
    bech32_encode,
    enterprise_address,
    enterprise_address_bytes,
    payment_address_bytes,
)
from proofnet.messages.attestation import (
    Attestation,
    AttestationError,
    BadSignature,
    EscrowRef,
    MalformedAttestation,
    UnknownVersion,
    WrongDomain,
    WrongEscrow,
    WrongJob,
    WrongNetwork,
    WrongScript,
    batch_root,
    batch_tree,
    protected_header,
    sign_attestation,
    verify_attestation,
)
from proofnet.messages.canonical import canonical_json
from proofnet.messages.merkle import verify_inclusion

SCRIPT = "5c" * 28
SK = SigningKey(bytes(range(32)))
VK = bytes(SK.verify_key)


def att_dict(network: str = "preprod", **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "domain": {
            "network": network,
            "escrow_script_hash": SCRIPT,
            "escrow": {"tx_id": "e1" * 32, "index": 2},
            "job_id": "10" * 32,
        },
        "worker_key": VK.hex(),
        "payout_address": enterprise_address(b"\x07" * 32, network),
        "started_ms": 1_760_000_000_000,
        "ended_ms": 1_760_000_360_000,
        "gpu_milliseconds": 360_000_000,
        "gpu_model": "NVIDIA H200",
        "gpu_uuid_sha256": "99" * 32,
        "image_digest": "sha256:" + "ab" * 32,
        "command_hash": "cc" * 32,
        "result_hashes": {"model.pt": "dd" * 32, "out/metrics.json": "ee" * 32},
        "pot_root": "f0" * 32,
        "metrics": {"accuracy": "0.9125", "steps": 5000, "loss": "-0.5"},
        "nonce": "0a" * 16,
        "amount": 25_000_000,
    }
    base.update(overrides)
    return base


def make_att(network: str = "preprod", **overrides: Any) -> Attestation:
    return Attestation.model_validate(att_dict(network, **overrides))


def cose_with_payload(payload: bytes, *, key: SigningKey = SK, network: str = "preprod") -> bytes:
    """A correctly signed COSE_Sign1 around arbitrary payload bytes."""
    vk = bytes(key.verify_key)
    protected = protected_header(vk, network)
    sig = key.sign(cbor2.dumps(["Signature1", protected, b"", payload])).signature
    return cbor2.dumps([protected, {"hashed": False}, payload, sig])


def verify(cose: bytes, network: str = "preprod", **kw: Any) -> Attestation:
    return verify_attestation(cose, expected_network=network, expected_script_hash=SCRIPT, **kw)


def test_round_trip() -> None:
    att = make_att()
    signed = sign_attestation(att, SK)
    assert verify(signed.cose) == att
    assert verify(signed.cose, expected_escrow=att.domain.escrow, expected_job_id=att.job_id) == att
    # A pycardano signing key's payload is its 32-byte seed: accepted directly.
    assert sign_attestation(att, bytes(range(32))).cose == signed.cose
    # The tagged form (0xd2 = tag 18) is accepted too.
    assert verify(b"\xd2" + signed.cose) == att


def test_cose_shape_is_cip8() -> None:
    signed = sign_attestation(make_att(), SK)
    protected, unprotected, payload, signature = cbor2.loads(signed.cose)
    header = cbor2.loads(protected)
    assert header[1] == -8  # alg EdDSA
    assert header[4] == VK  # kid
    assert header["address"] == enterprise_address_bytes(VK, "preprod")
    assert unprotected == {"hashed": False}
    assert payload == make_att().canonical_bytes()
    assert len(signature) == 64


def test_pycardano_cip8_verify_accepts_our_signature() -> None:
    from pycardano.cip import cip8

    att = make_att()
    result = cip8.verify(sign_attestation(att, SK).cose.hex())
    assert result["verified"] is True
    assert result["message"] == att.canonical_bytes().decode()
    assert str(result["signing_address"]) == enterprise_address(VK, "preprod")


def test_we_accept_pycardano_cip8_signature() -> None:
    from pycardano.cip import cip8
    from pycardano.key import PaymentSigningKey
    from pycardano.network import Network

    att = make_att()
    signed_hex = cip8.sign(
        att.canonical_bytes().decode(),
        PaymentSigningKey(bytes(range(32))),
        network=Network.TESTNET,
    )
    assert isinstance(signed_hex, str)
    assert verify(bytes.fromhex(signed_hex)) == att


# Each (path, new value) keeps the attestation valid but different.
TAMPERS: list[tuple[tuple[str, ...], Any]] = [
    (("domain", "network"), "preview"),
    (("domain", "escrow_script_hash"), "5d" * 28),
    (("domain", "escrow", "tx_id"), "e2" * 32),
    (("domain", "escrow", "index"), 3),
    (("domain", "job_id"), "11" * 32),
    (("payout_address",), enterprise_address(b"\x08" * 32, "preprod")),
    (("started_ms",), 1_760_000_000_001),
    (("ended_ms",), 1_760_000_360_001),
    (("gpu_milliseconds",), 360_000_001),
    (("gpu_model",), "NVIDIA H100"),
    (("gpu_uuid_sha256",), "98" * 32),
    (("image_digest",), "sha256:" + "ac" * 32),
    (("command_hash",), "cd" * 32),
    (("result_hashes", "model.pt"), "de" * 32),
    (("pot_root",), "f1" * 32),
    (("metrics", "accuracy"), "0.9126"),
    (("nonce",), "0b" * 16),
    (("amount",), 25_000_001),
]


@pytest.mark.parametrize(("path", "value"), TAMPERS, ids=[".".join(p) for p, _ in TAMPERS])
def test_each_field_tamper_is_detected(path: tuple[str, ...], value: Any) -> None:
    signed = sign_attestation(make_att(), SK)
    protected, unprotected, payload, signature = cbor2.loads(signed.cose)
    doc = json.loads(payload)
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    tampered = canonical_json(doc)
    assert tampered != payload
    Attestation.model_validate(json.loads(tampered))  # still a valid attestation...
    forged = cbor2.dumps([protected, unprotected, tampered, signature])
    with pytest.raises(BadSignature):  # ...but not the one that was signed
        verify(forged)


def test_signature_and_header_tampering() -> None:
    signed = sign_attestation(make_att(), SK)
    protected, unprotected, payload, signature = cbor2.loads(signed.cose)
    flipped = bytes([signature[0] ^ 1]) + signature[1:]
    with pytest.raises(BadSignature):
        verify(cbor2.dumps([protected, unprotected, payload, flipped]))
    # Another key in kid, with a matching address: signature no longer verifies.
    other = bytes(SigningKey(b"\x02" * 32).verify_key)
    with pytest.raises(BadSignature):
        verify(cbor2.dumps([protected_header(other, "preprod"), unprotected, payload, signature]))
    # Address header not bound to kid.
    header = cbor2.loads(protected)
    header["address"] = enterprise_address_bytes(other, "preprod")
    with pytest.raises(BadSignature, match="address header"):
        verify(cbor2.dumps([cbor2.dumps(header), unprotected, payload, signature]))


def test_signed_by_key_other_than_worker_key() -> None:
    intruder = SigningKey(b"\x03" * 32)
    cose = cose_with_payload(make_att().canonical_bytes(), key=intruder)
    with pytest.raises(BadSignature, match="worker_key"):
        verify(cose)
    with pytest.raises(ValueError, match="does not match"):
        sign_attestation(make_att(), intruder)


def test_cross_network_replay_rejected() -> None:
    signed = sign_attestation(make_att("preprod"), SK)
    for network in ("mainnet", "preview", "devnet"):
        with pytest.raises(WrongNetwork):
            verify(signed.cose, network)
    mainnet = sign_attestation(make_att("mainnet"), SK)
    assert verify(mainnet.cose, "mainnet").network == "mainnet"
    with pytest.raises(WrongNetwork):
        verify(mainnet.cose, "preprod")


def test_cross_script_escrow_and_job_replay_rejected() -> None:
    att = make_att()
    signed = sign_attestation(att, SK)
    with pytest.raises(WrongScript):
        verify_attestation(signed.cose, expected_network="preprod", expected_script_hash="5d" * 28)
    with pytest.raises(WrongEscrow):
        verify(signed.cose, expected_escrow=EscrowRef(tx_id="e1" * 32, index=3))
    with pytest.raises(WrongJob):
        verify(signed.cose, expected_job_id="11" * 32)
    # All of these are domain errors, and all are AttestationErrors.
    assert issubclass(WrongScript, WrongDomain) and issubclass(WrongDomain, AttestationError)


def test_wrong_domain_tag_and_unknown_version() -> None:
    doc = att_dict(version=1)
    doc["domain"] = dict(doc["domain"], tag="proofnet/approval/v1")
    with pytest.raises(WrongDomain, match="domain tag"):
        verify(cose_with_payload(canonical_json(doc)))
    doc = att_dict()
    doc["domain"] = dict(doc["domain"], tag="proofnet/attestation/v1")
    doc["version"] = 2
    with pytest.raises(UnknownVersion):
        verify(cose_with_payload(canonical_json(doc)))
    doc["version"] = True
    with pytest.raises(UnknownVersion):
        verify(cose_with_payload(canonical_json(doc)))


@pytest.mark.parametrize(
    "cose",
    [
        b"",
        b"\xff\xff",
        cbor2.dumps([1, 2, 3]),
        cbor2.dumps(cbor2.CBORTag(98, [b"", {}, b"", b"x" * 64])),
        cbor2.dumps([b"", {}, None, b"x" * 64]),  # detached payload
        cbor2.dumps([cbor2.dumps({1: -7}), {}, b"{}", b"x" * 64]),  # ES256, not EdDSA
        cbor2.dumps([cbor2.dumps({1: -8, 4: b"k"}), {}, b"{}", b"x" * 64]),  # short kid
    ],
)
def test_malformed_cose(cose: bytes) -> None:
    with pytest.raises(MalformedAttestation):
        verify(cose)


def test_signed_but_malformed_payloads() -> None:
    att = make_att()
    pretty = json.dumps(att.model_dump(), indent=1).encode()
    with pytest.raises(MalformedAttestation, match="canonical"):
        verify(cose_with_payload(pretty))
    doc = att_dict()
    doc["domain"] = dict(doc["domain"], tag="proofnet/attestation/v1")
    doc["version"] = 1
    doc["amount"] = 0
    with pytest.raises(MalformedAttestation, match="amount"):
        verify(cose_with_payload(canonical_json(doc)))
    doc["amount"] = 5
    doc["extra"] = "x"
    with pytest.raises(MalformedAttestation, match="extra"):
        verify(cose_with_payload(canonical_json(doc)))
    with pytest.raises(MalformedAttestation, match="JSON object"):
        verify(cose_with_payload(b"[]"))


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"metrics": {"loss": 0.5}}, "metrics.loss"),
        ({"metrics": {"loss": "1e-3"}}, "decimal string"),
        ({"metrics": {"bad name": 1}}, "metric name"),
        ({"payout_address": enterprise_address(b"\x07" * 32, "mainnet")}, "payout_address"),
        ({"payout_address": "addr_test1qqqqqqq"}, "payout_address"),
        ({"ended_ms": 1}, "ended_ms is before started_ms"),
        ({"nonce": "0a" * 8}, "16 to 32 bytes"),
        ({"image_digest": "ab" * 32}, "sha256:"),
        ({"worker_key": "AB" * 32}, "64 lowercase hex"),
        ({"gpu_model": ""}, "printable"),
    ],
)
def test_field_validation(change: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        make_att(**change)
    assert fragment in str(info.value)


def test_attestation_is_frozen_all_the_way_down() -> None:
    att = make_att()
    with pytest.raises(TypeError):
        att.result_hashes["model.pt"] = "00" * 32
    with pytest.raises(TypeError):
        att.metrics.update(x=1)
    with pytest.raises(ValueError):
        att.amount = 1  # type: ignore[misc]
    assert hash(att) == hash(make_att())


def test_payout_address_checks() -> None:
    base = enterprise_address_bytes(b"\x07" * 32, "preprod")
    assert payment_address_bytes(enterprise_address(b"\x07" * 32, "preprod"), "preprod") == base
    stake = bech32_encode("stake_test", bytes([0xE0]) + base[1:])
    with pytest.raises(AddressError):
        payment_address_bytes(stake, "preprod")
    reward_type = bech32_encode("addr_test", bytes([0xE0]) + base[1:])
    with pytest.raises(AddressError, match="not a payment address"):
        payment_address_bytes(reward_type, "preprod")
    good = enterprise_address(b"\x07" * 32, "preprod")
    corrupted = good[:-1] + ("q" if good[-1] != "q" else "p")
    with pytest.raises(AddressError, match="checksum"):
        payment_address_bytes(corrupted, "preprod")


def test_bech32_matches_pycardano() -> None:
    from pycardano.address import Address
    from pycardano.key import PaymentVerificationKey
    from pycardano.network import Network

    vk = PaymentVerificationKey(VK)
    for network, pc_network in (("mainnet", Network.MAINNET), ("preprod", Network.TESTNET)):
        expected = Address(payment_part=vk.hash(), network=pc_network)
        assert enterprise_address(VK, network) == str(expected)
        assert payment_address_bytes(str(expected), network) == expected.to_primitive()


def test_leaf_hash_and_batch_root() -> None:
    atts = [make_att(nonce=f"{i:032x}") for i in range(5)]
    tree = batch_tree(atts)
    assert tree.root == batch_root(atts)
    for i, att in enumerate(atts):
        assert tree.proof(i).path  # non-trivial
        assert verify_inclusion(att.canonical_bytes(), tree.proof(i), tree.root)
        assert att.leaf_hash() == tree.from_leaf_hashes([att.leaf_hash()]).root
    assert batch_root(list(reversed(atts))) != tree.root
    assert len({a.leaf_hash() for a in atts}) == 5
