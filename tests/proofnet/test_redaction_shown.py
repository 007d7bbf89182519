"""URLs with credentials, where they are shown: errors that name a configured URL (an
oracle's, a co-signer's, the API's) reach submitters, providers and logs, and never carry
its user or password. Real sockets: each URL points at a port nothing listens on, so the
failure message is the one a user would read."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from api.services.cancel_quorum import HttpCancelQuorum, Member, OracleRefused
from oracle.settlement.quorum import CoSignerClient, QuorumRefusal
from proofnet.processes import free_port
from worker.api_client import ApiClient, ApiUnavailable
from worker.identity import create_key
from worker.oracle_client import OracleClient, OracleUnavailable

SECRET = "s3cret-pass"


def _url() -> str:
    return f"http://admin:{SECRET}@127.0.0.1:{free_port()}"


def test_a_cancel_co_signers_url_is_redacted_in_what_the_submitter_reads() -> None:
    quorum = HttpCancelQuorum([_url()], timeout_s=2)
    member = Member(quorum.urls[0], "00" * 28)
    with pytest.raises(OracleRefused) as raised:
        quorum.cosign(member, "84a0")
    shown = f"{raised.value} {raised.value.url} {raised.value.reason}"
    assert "unreachable" in shown and SECRET not in shown and "***@" in shown


def test_a_settlement_co_signers_url_is_redacted_in_its_refusal() -> None:
    client = CoSignerClient(_url(), "00" * 28, timeout_s=2)
    with pytest.raises(QuorumRefusal) as raised:
        client.sign(SimpleNamespace(tx_cbor=b"\x84"), b"{}")  # type: ignore[arg-type]
    shown = str(raised.value)
    assert "unreachable" in shown and SECRET not in shown


def test_the_workers_api_and_oracle_urls_are_redacted_in_its_errors(tmp_path: Path) -> None:
    key = create_key(tmp_path / "worker.skey")
    api = ApiClient(_url(), key, "devnet")
    with api, pytest.raises(ApiUnavailable) as api_raised:
        api.claim()
    api_shown = str(api_raised.value)
    oracle = OracleClient(_url())
    with pytest.raises(OracleUnavailable) as oracle_raised:
        oracle.submit(b"\x84")
    oracle.close()
    oracle_shown = str(oracle_raised.value)
    assert SECRET not in api_shown and "***@" in api_shown
    assert SECRET not in oracle_shown and "***@" in oracle_shown
