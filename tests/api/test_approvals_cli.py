"""`proofnet approvals`: seniors list and endorse applications, applicants apply and follow
them, from the command line against the API over HTTP, signing with key files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_support import Wallet
from typer.testing import CliRunner

from api.app import create_app
from api.approvals_cli import ApprovalError, endorse
from api.client_cli import JobClient
from api.db import make_engine, open_session
from api.migrate import upgrade_head
from api.services.users import add_senior
from chain.devnet.testing import serve_app
from proofnet import cli


@pytest.fixture
def served(make_config: Any, clock: Any, tmp_path: Path) -> Iterator[tuple[str, list[Wallet]]]:
    """The API on a real port needing two endorsements, with three seniors."""
    config = make_config(approval_endorsements=2)
    engine = make_engine(config.database_url)
    upgrade_head(engine)
    app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)
    seniors = [Wallet() for _ in range(3)]
    with open_session(engine) as session:
        for s in seniors:
            add_senior(session, config, s.address, clock())
    with serve_app(app) as url:
        yield url, seniors
    engine.dispose()


def _key_file(tmp_path: Path, wallet: Wallet, name: str) -> Path:
    path = tmp_path / "keys" / f"{name}.skey"
    path.parent.mkdir(parents=True, exist_ok=True)
    wallet.signing_key.save(str(path))
    return path


def _proofnet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *argv: str) -> Any:
    monkeypatch.setenv("PROOFNET_DATA_DIR", str(tmp_path / "user-data"))
    monkeypatch.setenv("PROOFNET_NETWORK", "devnet")
    return CliRunner().invoke(cli.app, ["approvals", *argv])


def test_seniors_endorse_and_the_applicant_follows_from_the_command_line(
    served: tuple[str, list[Wallet]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seniors = served
    applicant = Wallet()
    me = ["--key-file", str(_key_file(tmp_path, applicant, "me")), "--api-url", url]
    keys = [
        ["--key-file", str(_key_file(tmp_path, s, f"senior{i}")), "--api-url", url]
        for i, s in enumerate(seniors)
    ]

    applied = _proofnet(monkeypatch, tmp_path, "apply", *me, "--statement", "small LMs")
    assert applied.exit_code == 0, applied.output
    number = applied.output.split("#")[1].split()[0]
    assert f"{applicant.address}: 0 of 2 endorsements" in applied.output

    listed = _proofnet(monkeypatch, tmp_path, "list", *keys[0])
    assert listed.exit_code == 0, listed.output
    assert f"#{number} {applicant.address}: 0 of 2 endorsements" in listed.output
    assert '"small LMs"' in listed.output

    first = _proofnet(monkeypatch, tmp_path, "endorse", number, *keys[0])
    assert first.exit_code == 0, first.output
    assert f"1 of 2 endorsements, by {seniors[0].address}" in first.output
    status = _proofnet(monkeypatch, tmp_path, "status", *me)
    assert f"1 of 2 endorsements, by {seniors[0].address}" in status.output
    # The list says who endorsed, and marks what this key did.
    listed = _proofnet(monkeypatch, tmp_path, "list", *keys[0])
    assert f"by {seniors[0].address} [you endorsed it]" in listed.output
    as_json = json.loads(_proofnet(monkeypatch, tmp_path, "list", *keys[1], "--json").output)
    assert [e["address"] for e in as_json["data"][0]["endorsers"]] == [seniors[0].address]

    # Twice with one key: one line, exit 2, nothing signed or sent.
    again = _proofnet(monkeypatch, tmp_path, "endorse", number, *keys[0])
    assert again.exit_code == 2
    assert again.output.strip() == f"error: your key has already endorsed application {number}"

    second = _proofnet(monkeypatch, tmp_path, "endorse", number, *keys[1])
    assert second.exit_code == 0, second.output
    assert "approved (2 of 2 endorsements, by" in second.output
    status = _proofnet(monkeypatch, tmp_path, "status", *me)
    assert status.output.startswith(f"#{number} {applicant.address}: approved")
    assert (
        "no applications are waiting" in _proofnet(monkeypatch, tmp_path, "list", *keys[2]).output
    )


def test_refusals_are_one_line_and_exit_2(
    served: tuple[str, list[Wallet]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = served
    outsider = ["--key-file", str(_key_file(tmp_path, Wallet(), "outsider")), "--api-url", url]
    listed = _proofnet(monkeypatch, tmp_path, "list", *outsider)
    assert listed.exit_code == 2
    assert listed.output.strip().startswith("error: GET /approvals/pending: HTTP 403:")
    assert len(listed.output.strip().splitlines()) == 1
    missing = _proofnet(monkeypatch, tmp_path, "status", *outsider)
    assert missing.exit_code == 2 and "you have not applied" in missing.output
    gone = _proofnet(
        monkeypatch, tmp_path, "list", *outsider[:2], "--api-url", "http://127.0.0.1:9"
    )
    assert gone.exit_code == 2 and "cannot reach the API at http://127.0.0.1:9" in gone.output


def _hostile_api(message: str, posts: list[str]) -> httpx.Client:
    """An API that asks the key to sign `message` as application 7's endorsement."""

    def answer(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/auth/challenge"):
            return httpx.Response(200, json={"nonce": "n", "message": "sign in"})
        if path.endswith("/auth/verify"):
            return httpx.Response(200, json={"access_token": "t"})
        if request.method == "POST":
            posts.append(path)
            return httpx.Response(201, json={})
        return httpx.Response(
            200,
            json={
                "id": 7,
                "applicant": Wallet().address,
                "applicant_key_hash": "00" * 28,
                "endorsers": [],
                "endorsement_message": message,
            },
        )

    return httpx.Client(transport=httpx.MockTransport(answer))


def test_the_command_signs_nothing_but_the_endorsement_it_builds_itself(tmp_path: Path) -> None:
    # A hostile (or wrong) API must not get the key to sign anything else: a sign-in
    # challenge of another service, or the endorsement of another application or network.
    senior = Wallet()
    for forged in (
        "Sign in to another-dapp.example: nonce 1234",
        "proofnet endorsement v1\nnetwork: mainnet\napplicant: x\napplication: 7\n"
        "I vouch that this applicant may submit training jobs.",
    ):
        posts: list[str] = []
        client = JobClient("http://api.test", senior.signing_key, http=_hostile_api(forged, posts))
        with pytest.raises(ApprovalError, match="refusing to sign"):
            endorse(client, 7, "devnet")
        assert posts == []
