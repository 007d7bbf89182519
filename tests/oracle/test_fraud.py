"""Which rejected attestations the oracle quorum may slash a bond for (oracle.storage.fraud): only
a provider-signed attestation whose committed segments did not replay; each case cites
what the bond script checks (chain.offchain.builders.bond.citation_of accepts it)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from attestation_support import signed_attestation
from nacl.signing import SigningKey
from sqlalchemy import create_engine

from chain.offchain.builders.bond import citation_of
from oracle.models import REJECTED, VERIFIED, AttestationRecord
from oracle.storage.fraud import fraud_cases
from oracle.storage.store import AttestationStore
from oracle.verification.verify import Reason
from proofnet.messages.attestation import (
    Attestation,
    EscrowRef,
    attestation_of_cose,
)

PROVIDER = SigningKey(b"\x0a" * 32)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def signed(job: int, key: SigningKey = PROVIDER) -> tuple[Attestation, bytes]:
    cose = signed_attestation(
        key,
        hashlib.sha256(b"job%d" % job).digest(),
        hashlib.sha256(b"root%d" % job).digest(),
        escrow=EscrowRef(tx_id="ef" * 32, index=job),
    )
    return attestation_of_cose(cose), cose


def record(
    job: int, status: str, reason: str, *, worker: SigningKey = PROVIDER
) -> AttestationRecord:
    att, cose = signed(job)
    return AttestationRecord(
        job_id=att.job_id,
        escrow_tx_id="ef" * 32,
        escrow_index=job,
        escrow_ref=f"{'ef' * 32}#{job}",
        worker_key=bytes(worker.verify_key).hex(),
        payout_address=att.payout_address,
        amount=att.amount,
        cose=cose,
        leaf_hash=att.leaf_hash().hex(),
        status=status,
        reason=reason,
        received_at=NOW,
        updated_at=NOW,
    )


def test_only_a_failed_spot_check_of_a_signed_attestation_is_a_fraud(tmp_path: Path) -> None:
    store = AttestationStore(create_engine(f"sqlite:///{tmp_path / 'oracle.db'}"))
    store.create_schema()
    with store.session() as s:
        s.add(record(1, REJECTED, str(Reason.SPOT_CHECK_FAILED)))  # the fraud
        s.add(record(2, REJECTED, str(Reason.ESCROW_MISMATCH)))  # refused, no proven lie
        s.add(record(3, VERIFIED, ""))
        s.add(record(5, REJECTED, str(Reason.REPLAY_ERROR)))  # a crash proves no lie either
        # Stored under another worker's key than the one that signed: not that worker's.
        s.add(record(4, REJECTED, str(Reason.SPOT_CHECK_FAILED), worker=SigningKey(b"\x0b" * 32)))
        s.commit()
    (case,) = fraud_cases(store)
    att, cose = signed(1)
    assert case.job_id == att.job_id and case.pot_root == att.pot_root and case.cose == cose
    assert case.provider == hashlib.blake2b(bytes(PROVIDER.verify_key), digest_size=28).hexdigest()
    citation = citation_of(case.cose, bytes.fromhex(case.job_id), bytes.fromhex(case.pot_root))
    assert citation.provider_pkh.hex() == case.provider
    assert fraud_cases(store, job_id=att.job_id) == [case]
    assert fraud_cases(store, job_id=signed(2)[0].job_id) == []


def test_the_frauds_command_writes_the_attestation_a_slash_cites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from oracle.cli import app

    url = f"sqlite:///{tmp_path / 'oracle.db'}"
    store = AttestationStore(create_engine(url))
    store.create_schema()
    with store.session() as s:
        s.add(record(1, REJECTED, str(Reason.SPOT_CHECK_FAILED)))
        s.commit()
    monkeypatch.setenv("PROOFNET_DATABASE_URL", url)
    result = CliRunner().invoke(app, ["frauds", "--out", str(tmp_path / "cases")])
    assert result.exit_code == 0, result.output
    att, cose = signed(1)
    assert att.job_id in result.output
    written = (tmp_path / "cases" / f"{att.job_id}.cose.hex").read_text().strip()
    assert bytes.fromhex(written) == cose


def test_a_replay_that_crashed_is_not_confirmed_and_is_no_fraud() -> None:
    """A verifier's replay that crashed or printed no report (the job's code, or the
    verifier's machine) leaves the proof unconfirmed: not paid, but no bond is slashed for it,
    since no committed segment was shown to be false."""
    from types import SimpleNamespace

    from oracle.storage.fraud import FRAUD_REASONS
    from oracle.verification.spotcheck import judge

    draw = SimpleNamespace(seed=b"\x01" * 32, segments=(3, 7))
    for status in ("error", "no-such-status", None):
        verdict = judge(
            {"status": status, "message": "Killed"},
            None,  # type: ignore[arg-type]
            draw,  # type: ignore[arg-type]
            0,
            from_scratch=True,
        )
        assert not verdict.passed and verdict.reason == Reason.REPLAY_ERROR, verdict
        assert str(verdict.reason) not in FRAUD_REASONS
