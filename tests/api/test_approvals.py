"""Submitter approval: N distinct senior endorsements, each a wallet signature."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from api_support import Wallet, job_spec, sign_in
from fastapi.testclient import TestClient
from pycardano import Address, Network, VerificationKeyHash
from sqlmodel import Session, select

from api.config import ApiConfig
from api.models import Endorsement, User
from api.services.users import add_senior


def _apply(client: TestClient) -> tuple[Wallet, dict[str, str], dict[str, Any]]:
    wallet = Wallet()
    headers = sign_in(client, wallet)
    response = client.post(
        "/api/v1/approvals", json={"statement": "I train small LMs"}, headers=headers
    )
    assert response.status_code == 201, response.text
    return wallet, headers, dict(response.json())


def _endorse(client: TestClient, senior: Wallet, application: dict[str, Any]) -> Any:
    headers = sign_in(client, senior)
    return client.post(
        f"/api/v1/approvals/{application['id']}/endorsements",
        json=senior.sign_data(application["endorsement_message"]),
        headers=headers,
    )


def test_four_endorsements_are_not_enough_five_are(
    client: TestClient, seniors: list[Wallet]
) -> None:
    _, headers, application = _apply(client)
    assert application["endorsements_required"] == 5
    assert "proofnet endorsement v1" in application["endorsement_message"]
    for i, senior in enumerate(seniors[:4], start=1):
        response = _endorse(client, senior, application)
        assert response.status_code == 201, response.text
        assert response.json()["endorsements"] == i
        assert response.json()["approved"] is False
    spec = job_spec()
    refused = client.post("/api/v1/jobs", json={"spec": spec}, headers=headers)
    assert refused.status_code == 403
    assert "approved submitters" in refused.json()["detail"]

    fifth = _endorse(client, seniors[4], application)
    assert fifth.status_code == 201
    assert fifth.json()["endorsements"] == 5
    assert fifth.json()["approved"] is True
    assert client.get("/api/v1/users/me", headers=headers).json()["is_approved"] is True
    posted = client.post("/api/v1/jobs", json={"spec": spec}, headers=headers)
    assert posted.status_code == 201, posted.text


def test_duplicate_endorser_counts_once(client: TestClient, seniors: list[Wallet]) -> None:
    _, _, application = _apply(client)
    for senior in seniors[:4]:
        assert _endorse(client, senior, application).status_code == 201
    again = _endorse(client, seniors[0], application)
    assert again.status_code == 409
    mine = client.get(f"/api/v1/approvals/{application['id']}", headers=sign_in(client, seniors[5]))
    assert mine.json()["endorsements"] == 4
    assert mine.json()["approved"] is False


def test_non_senior_endorser_is_refused(client: TestClient, seniors: list[Wallet]) -> None:
    _, _, application = _apply(client)
    outsider = Wallet()
    response = _endorse(client, outsider, application)
    assert response.status_code == 403
    assert "senior" in response.json()["detail"]


def test_endorsement_must_sign_this_applications_message(
    client: TestClient, seniors: list[Wallet]
) -> None:
    _, _, first = _apply(client)
    _, _, second = _apply(client)
    senior = seniors[0]
    headers = sign_in(client, senior)
    # A signature over the first application's message cannot endorse the second.
    response = client.post(
        f"/api/v1/approvals/{second['id']}/endorsements",
        json=senior.sign_data(first["endorsement_message"]),
        headers=headers,
    )
    assert response.status_code == 401
    # Nor can a senior's signature made by another wallet's key.
    other = client.post(
        f"/api/v1/approvals/{second['id']}/endorsements",
        json=Wallet().sign_data(second["endorsement_message"]),
        headers=headers,
    )
    assert other.status_code == 401


def test_senior_cannot_endorse_self(
    client: TestClient, session: Session, config: ApiConfig, clock: Any, seniors: list[Wallet]
) -> None:
    wallet, headers, application = _apply(client)
    add_senior(session, config, wallet.address, clock())
    response = client.post(
        f"/api/v1/approvals/{application['id']}/endorsements",
        json=wallet.sign_data(application["endorsement_message"]),
        headers=headers,
    )
    assert response.status_code == 403


def test_applying_twice_and_pending_list(client: TestClient, seniors: list[Wallet]) -> None:
    _, headers, application = _apply(client)
    again = client.post("/api/v1/approvals", json={}, headers=headers)
    assert again.status_code == 409
    assert client.get("/api/v1/approvals/pending", headers=headers).status_code == 403
    pending = client.get("/api/v1/approvals/pending", headers=sign_in(client, seniors[0]))
    assert [a["id"] for a in pending.json()["data"]] == [application["id"]]
    mine = client.get("/api/v1/approvals/me", headers=headers)
    assert mine.json()["id"] == application["id"]


@pytest.mark.parametrize("required", [1, 3])
def test_threshold_is_configurable(
    make_config: Any, required: int, sqlite_url: str, clock: Any
) -> None:
    from api.app import create_app
    from api.db import make_engine, open_session

    config = make_config(approval_endorsements=required)
    engine = make_engine(sqlite_url)
    app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)
    with TestClient(app) as client:
        seniors = [Wallet() for _ in range(required)]
        with open_session(engine) as session:
            for s in seniors:
                add_senior(session, config, s.address, clock())
        _, _, application = _apply(client)
        for i, senior in enumerate(seniors, start=1):
            body = _endorse(client, senior, application).json()
            assert body["approved"] is (i == required)
    engine.dispose()


# --- an endorser is a key, not an address ---------------------------------------------------


@dataclass
class AnotherAddress(Wallet):
    """The same payment key under a base address (with a stake credential of its own): a
    second account here, but the same endorser."""

    stake: bytes = b"\x5a" * 28

    @property
    def address(self) -> str:
        vk = self.signing_key.to_verification_key()
        return str(Address(vk.hash(), VerificationKeyHash(self.stake), network=Network.TESTNET))


def _endorsers(response: Any) -> list[str]:
    return [e["address"] for e in response.json()["endorsers"]]


def test_a_senior_cannot_endorse_an_application_filed_under_another_address_of_its_key(
    client: TestClient, seniors: list[Wallet]
) -> None:
    senior = seniors[0]
    alias = AnotherAddress(signing_key=senior.signing_key)
    assert alias.address != senior.address
    # The senior's key applies under its base address, then endorses itself as the senior.
    headers = sign_in(client, alias)
    filed = client.post("/api/v1/approvals", json={"statement": "me again"}, headers=headers)
    assert filed.status_code == 201, filed.text
    application = filed.json()
    assert (
        application["applicant_key_hash"]
        == senior.signing_key.to_verification_key().hash().payload.hex()
    )
    refused = _endorse(client, senior, application)
    assert refused.status_code == 403, refused.text
    assert "your own application" in refused.json()["detail"]
    # Honest twin: another senior's key endorses it.
    accepted = _endorse(client, seniors[1], application)
    assert accepted.status_code == 201 and _endorsers(accepted) == [seniors[1].address]


def test_one_key_endorses_once_through_any_of_its_addresses(
    client: TestClient, session: Session, config: ApiConfig, clock: Any, seniors: list[Wallet]
) -> None:
    senior = seniors[0]
    alias = AnotherAddress(signing_key=senior.signing_key)
    add_senior(session, config, alias.address, clock())  # both addresses are seniors
    _, applicant_headers, application = _apply(client)
    assert _endorse(client, senior, application).status_code == 201
    twice = _endorse(client, alias, application)
    assert twice.status_code == 409, twice.text
    assert f"already endorsed this application (as {senior.address})" in twice.json()["detail"]
    # Honest twin: a distinct key counts; the applicant sees who endorsed, once per key.
    assert _endorse(client, seniors[1], application).status_code == 201
    mine = client.get("/api/v1/approvals/me", headers=applicant_headers)
    assert mine.json()["endorsements"] == 2
    assert _endorsers(mine) == [senior.address, seniors[1].address]


def test_rows_a_race_left_for_one_key_count_once(
    client: TestClient, session: Session, config: ApiConfig, clock: Any, seniors: list[Wallet]
) -> None:
    # Two addresses of one key endorsing at the same instant can both pass the check
    # before either commits; the count and the list are of keys, so the second row is inert.
    senior = seniors[0]
    alias = AnotherAddress(signing_key=senior.signing_key)
    add_senior(session, config, alias.address, clock())
    _, headers, application = _apply(client)
    assert _endorse(client, senior, application).status_code == 201
    endorser = session.exec(select(User).where(User.address == alias.address)).one()
    session.add(
        Endorsement(
            application_id=application["id"],
            endorser_id=endorser.id,
            message=application["endorsement_message"],
            signature="00",
            key="00",
            created_at=clock(),
        )
    )
    session.commit()
    mine = client.get("/api/v1/approvals/me", headers=headers).json()
    assert mine["endorsements"] == 1 and [e["address"] for e in mine["endorsers"]] == [
        senior.address
    ]


def test_an_approved_application_takes_no_more_endorsements(
    make_config: Any, sqlite_url: str, clock: Any
) -> None:
    from api.app import create_app
    from api.db import make_engine, open_session

    config = make_config(approval_endorsements=1)
    engine = make_engine(sqlite_url)
    app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)
    with TestClient(app) as client:
        seniors = [Wallet(), Wallet()]
        with open_session(engine) as session:
            for s in seniors:
                add_senior(session, config, s.address, clock())
        _, _, application = _apply(client)
        assert _endorse(client, seniors[0], application).json()["approved"] is True
        late = _endorse(client, seniors[1], application)
        assert late.status_code == 409 and "already approved" in late.json()["detail"]
    engine.dispose()


def test_seniors_see_who_endorsed_each_pending_application(
    client: TestClient, seniors: list[Wallet]
) -> None:
    _, _, first = _apply(client)
    _, _, second = _apply(client)
    assert _endorse(client, seniors[2], second).status_code == 201
    pending = client.get("/api/v1/approvals/pending", headers=sign_in(client, seniors[0]))
    rows = {a["id"]: a for a in pending.json()["data"]}
    assert rows[first["id"]]["endorsers"] == []
    [endorser] = rows[second["id"]]["endorsers"]
    assert endorser["address"] == seniors[2].address
    assert endorser["key_hash"] == seniors[2].signing_key.to_verification_key().hash().payload.hex()
    assert rows[second["id"]]["endorsements"] == 1
    assert rows[second["id"]]["endorsements_required"] == 5


def test_the_approval_routes_document_their_refusals(client: TestClient) -> None:
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    endorse = paths["/api/v1/approvals/{application_id}/endorsements"]["post"]["responses"]
    assert {"201", "401", "403", "404", "409"} <= set(endorse)
    assert "your own key" in endorse["403"]["description"]
    assert {"200", "401", "403"} <= set(paths["/api/v1/approvals/pending"]["get"]["responses"])
    assert "404" in paths["/api/v1/approvals/me"]["get"]["responses"]
