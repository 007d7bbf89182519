"""Storage messages played by the attacker: offers moved to another key, network or price;
answers that forge a proof, replay an old challenge, cut a chunk short or name a chunk that
is not there."""

from __future__ import annotations

import base64
import re
import secrets

import pytest
from nacl.signing import SigningKey
from pycardano import Address, Network, PaymentSigningKey
from pydantic import ValidationError

from proofnet.messages import storage as s

NETWORK = "devnet"


def _address() -> str:
    vk = PaymentSigningKey.generate().to_verification_key()
    return str(Address(vk.hash(), network=Network.TESTNET))


def _terms(**over: object) -> s.StorageTerms:
    fields: dict[str, object] = {
        "endpoint": "http://127.0.0.1:9000",
        "bucket": "proofnet-store",
        "capacity_bytes": 10 * s.GB,
        "ntx_per_gb_month": 2_000,
    }
    fields.update(over)
    return s.StorageTerms.model_validate(fields)


def _offer(key: SigningKey, nonce: str | None = None, **over: object) -> s.StorageOffer:
    return s.sign_offer(
        key,
        network=NETWORK,
        payout_address=_address(),
        nonce=nonce or secrets.token_hex(16),
        terms=_terms(**over),
    )


def test_an_offer_verifies_for_its_own_key_nonce_and_network() -> None:
    key = SigningKey.generate()
    offer = _offer(key, nonce="ab" * 16)
    s.verify_offer(offer, network=NETWORK, nonce="ab" * 16, provider_pubkey=offer.provider_pubkey)


def test_an_offer_presented_for_another_key_is_refused() -> None:
    offer = _offer(SigningKey.generate(), nonce="ab" * 16)
    other = bytes(SigningKey.generate().verify_key).hex()
    with pytest.raises(s.StorageError, match="another provider key"):
        s.verify_offer(offer, network=NETWORK, nonce="ab" * 16, provider_pubkey=other)


def test_an_offer_whose_key_field_is_swapped_does_not_verify() -> None:
    # The attacker keeps a victim's signature but names its own key as the provider.
    offer = _offer(SigningKey.generate(), nonce="ab" * 16)
    mine = bytes(SigningKey.generate().verify_key).hex()
    forged = offer.model_copy(update={"provider_pubkey": mine})
    with pytest.raises(s.StorageError, match="does not verify"):
        s.verify_offer(forged, network=NETWORK, nonce="ab" * 16, provider_pubkey=mine)


@pytest.mark.parametrize(
    "update",
    [
        {"ntx_per_gb_month": 1},
        {"capacity_bytes": 10**15},
        {"endpoint": "http://evil.example:9000"},
        {"bucket": "other-bucket"},
    ],
)
def test_changing_any_term_after_signing_breaks_the_signature(update: dict[str, object]) -> None:
    offer = _offer(SigningKey.generate(), nonce="cd" * 16)
    forged = offer.model_copy(update={"terms": offer.terms.model_copy(update=update)})
    with pytest.raises(s.StorageError, match="does not verify"):
        s.verify_offer(forged, network=NETWORK, nonce="cd" * 16, provider_pubkey=offer.provider_pubkey)  # fmt: skip


def test_an_offer_is_bound_to_the_nonce_and_the_network() -> None:
    offer = _offer(SigningKey.generate(), nonce="ef" * 16)
    with pytest.raises(s.StorageError, match="nonce"):
        s.verify_offer(offer, network=NETWORK, nonce="00" * 16, provider_pubkey=offer.provider_pubkey)  # fmt: skip
    with pytest.raises(s.StorageError, match="network"):
        s.verify_offer(offer, network="preprod", nonce="ef" * 16, provider_pubkey=offer.provider_pubkey)  # fmt: skip


@pytest.mark.parametrize(
    ("update", "words"),
    [
        ({"ntx_per_gb_month": 0}, "greater than or equal to 1"),
        ({"ntx_per_gb_month": -5}, "greater than or equal to 1"),
        ({"ntx_per_gb_month": 2**63}, "less than or equal to"),
        ({"ntx_per_gb_month": 1.5}, "integer"),
        ({"capacity_bytes": 1000}, "greater than or equal to 1048576"),
        ({"endpoint": "ftp://host"}, "http(s)://host[:port]"),
        ({"endpoint": "http://user:pw@host"}, "credentials"),
        ({"endpoint": "http://host/path"}, "no path"),
        ({"bucket": "Upper_Case"}, "S3 bucket name"),
        ({"bucket": "a..b"}, "S3 bucket name"),
    ],
)
def test_bad_terms_are_refused_with_a_reason(update: dict[str, object], words: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(words)):
        _terms(**update)


def test_storage_cost_is_per_gb_month_rounded_up() -> None:
    assert s.storage_cost(s.GB, 1_000, s.MONTH_S) == 1_000
    assert s.storage_cost(2 * s.GB, 1_000, s.MONTH_S // 2) == 1_000
    assert s.storage_cost(1, 1, 1) == 1  # held, so paid at least one base unit
    assert s.storage_cost(0, 1_000, s.MONTH_S) == 0
    with pytest.raises(s.StorageError):
        s.storage_cost(-1, 1, 1)


# --- challenges -------------------------------------------------------------------------

DATA = secrets.token_bytes(5 * 1024 + 300)  # six chunks of 1 KiB, the last one short


@pytest.fixture
def commitment() -> s.Commitment:
    return s.commit(DATA, chunk_size=1024)


def _answer_from(data: bytes, sidecar: bytes, c: s.Commitment, ch: s.RetrievalChallenge) -> s.RetrievalAnswer:  # fmt: skip
    start, end = s.chunk_range(c, ch.index)
    a, b = s.slot_range(c, ch.index)
    return s.RetrievalAnswer.of(
        ch.challenge_id, ch.index, data[start:end], s.path_of_slot(sidecar[a:b], c)
    )


def _challenge(c: s.Commitment, index: int) -> s.RetrievalChallenge:
    return s.RetrievalChallenge(
        challenge_id=secrets.token_hex(16),
        placement_id=1,
        object_key="jobs/abc/data/0",
        commitment=c,
        index=index,
    )


def test_every_chunk_answers_from_the_object_and_its_sidecar(commitment: s.Commitment) -> None:
    assert commitment.chunk_count == 6
    sidecar = s.proof_sidecar(DATA, commitment)
    for i in range(commitment.chunk_count):
        ch = _challenge(commitment, i)
        assert s.verify_answer(ch, _answer_from(DATA, sidecar, commitment, ch)).passed


def test_a_forged_proof_does_not_reach_the_root(commitment: s.Commitment) -> None:
    # A provider that lost chunk 2 serves other bytes with a path made up to match them.
    ch = _challenge(commitment, 2)
    fake_chunk = secrets.token_bytes(1024)
    forged = s.RetrievalAnswer.of(ch.challenge_id, 2, fake_chunk, ("00" * 32,) * 3)
    verdict = s.verify_answer(ch, forged)
    assert not verdict.passed and "committed root" in verdict.reason
    # ... and the true path with a wrong chunk fails too.
    sidecar = s.proof_sidecar(DATA, commitment)
    a, b = s.slot_range(commitment, 2)
    wrong = s.RetrievalAnswer.of(
        ch.challenge_id, 2, fake_chunk, s.path_of_slot(sidecar[a:b], commitment)
    )
    assert not s.verify_answer(ch, wrong).passed


def test_a_replayed_old_answer_is_refused(commitment: s.Commitment) -> None:
    sidecar = s.proof_sidecar(DATA, commitment)
    old = _challenge(commitment, 1)
    old_answer = _answer_from(DATA, sidecar, commitment, old)
    assert s.verify_answer(old, old_answer).passed
    # The same index drawn again under a new challenge: the old answer is not the new one's.
    new = _challenge(commitment, 1)
    verdict = s.verify_answer(new, old_answer)
    assert not verdict.passed and "another challenge" in verdict.reason
    # An answer relabelled with the new id but for another chunk is refused as well.
    relabelled = old_answer.model_copy(update={"challenge_id": new.challenge_id, "index": 1})
    other = _challenge(commitment, 3).model_copy(update={"challenge_id": new.challenge_id})
    assert not s.verify_answer(other, relabelled).passed


def test_a_challenge_for_a_chunk_out_of_range_cannot_be_made(commitment: s.Commitment) -> None:
    with pytest.raises(ValidationError, match="out of range: the object has 6 chunks"):
        _challenge(commitment, 6)
    with pytest.raises(s.StorageError, match="out of range"):
        s.chunk_range(commitment, 6)


def test_a_short_chunk_fails_even_when_the_prefix_is_right(commitment: s.Commitment) -> None:
    sidecar = s.proof_sidecar(DATA, commitment)
    ch = _challenge(commitment, 0)
    good = _answer_from(DATA, sidecar, commitment, ch)
    short = good.model_copy(
        update={"chunk": base64.b64encode(base64.b64decode(good.chunk)[:-1]).decode()}
    )
    verdict = s.verify_answer(ch, short)
    assert not verdict.passed and "1024 bytes" in verdict.reason


def test_a_malformed_proof_slot_is_the_providers_failure(commitment: s.Commitment) -> None:
    width = s.slot_size(commitment)
    with pytest.raises(s.StorageError, match="claims 200 hashes"):
        s.path_of_slot(bytes([200]) + b"\0" * (width - 1), commitment)
    with pytest.raises(s.StorageError, match="bytes, expected"):
        s.path_of_slot(b"\0", commitment)


def test_no_answer_fails() -> None:
    c = s.commit(b"x" * 2048, chunk_size=1024)
    assert not s.verify_answer(_challenge(c, 0), None).passed


def test_a_sidecar_is_only_made_for_the_committed_data(commitment: s.Commitment) -> None:
    with pytest.raises(s.StorageError, match="root differs"):
        s.proof_sidecar(DATA[:-1] + b"\x00", commitment)
