"""`GET /jobs/{id}/escrow` and `GET /network`: the escrow's state comes from the API's
records (whichever client locked it), with its closing transaction, confirmations and
explorer links, and what the submitter may do next, its times in UTC and from now, never
in slots. The on-chain cancel itself is tested against a devnet (test_escrow_cancel.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from api_support import FakeClock, Wallet, Worker, job_spec, sign_in
from escrow_support import ESCROW_TX, attach_chain, record_escrow
from fastapi.testclient import TestClient
from movement_support import add_movement
from sqlmodel import Session

from api.services.balances import clear_caches

WHEN = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? UTC \((in [0-9a-z ]+|[0-9a-z ]+ ago|now)\)")


def _post(client: TestClient, headers: dict[str, str]) -> str:
    response = client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["job_id"])


def _escrow(client: TestClient, job_id: str, headers: dict[str, str]) -> dict[str, Any]:
    response = client.get(f"/api/v1/jobs/{job_id}/escrow", headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _no_slots(body: Any) -> None:
    assert "slot" not in str(body).lower(), body


def test_a_locked_escrow_offers_the_cancel_and_says_when_a_refund_opens(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    session: Session,
    clock: FakeClock,
) -> None:
    attach_chain(client)
    _wallet, headers = approved
    job_id = _post(client, headers)
    assert _escrow(client, job_id, headers)["state"] == "none"

    record_escrow(session, job_id, clock, deadline_in_s=3 * 3600 + 600)
    body = _escrow(client, job_id, headers)
    assert (body["state"], body["tx_id"], body["budget"]) == ("locked", ESCROW_TX, 1_000_000)
    assert body["deadline"].endswith("UTC (in 3 h 10 min)"), body["deadline"]
    assert body["cancel"]["possible"] is True
    assert body["refund"]["possible"] is False
    assert WHEN.search(body["refund"]["message"]) and "in 3 h 10 min" in body["refund"]["message"]
    assert body["lock_explorer"] == {"devnet": f"http://127.0.0.1:3030/explorer/tx/{ESCROW_TX}"}
    _no_slots(body)

    clock.advance(3 * 3600 + 601)
    later = _escrow(client, job_id, headers)
    assert later["refund"]["possible"] is True and later["deadline"].endswith("ago)")


def test_once_a_provider_leased_the_job_the_cancel_says_when_work_started_and_refund_opens(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    session: Session,
    clock: FakeClock,
    worker_factory: Callable[[], Worker],
) -> None:
    attach_chain(client)
    _wallet, headers = approved
    job_id = _post(client, headers)
    record_escrow(session, job_id, clock, deadline_in_s=5 * 3600)
    worker = worker_factory()
    registered = worker.register([("NVIDIA A100-SXM4-80GB", 81920)])
    claimed = worker.claim()
    assert claimed.status_code == 200 and claimed.json()["job_id"] == job_id, claimed.text
    clock.advance(1800)

    body = _escrow(client, job_id, headers)
    message = body["cancel"]["message"]
    assert body["cancel"]["possible"] is False
    assert message.startswith("work started at ") and "(30 min ago)" in message, message
    assert f"in lease by provider {registered['key_id']}" in message
    assert "refund possible after the deadline" in message and "(in 4 h 30 min)" in message
    _no_slots(body)

    # The API refuses the cancel itself with the same reason, before touching the chain.
    client.app.state.deployment = object()  # type: ignore[attr-defined]
    client.app.state.chain_context = object()  # type: ignore[attr-defined]
    refused = client.post(f"/api/v1/jobs/{job_id}/escrow/cancel/build", json={}, headers=headers)
    assert refused.status_code == 409, refused.text
    assert "work started at" in refused.json()["detail"]
    assert "in 4 h 30 min" in refused.json()["detail"]


def test_the_record_of_the_chain_tells_settled_paid_and_returned_in_any_browser(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    session: Session,
    clock: FakeClock,
) -> None:
    chain = attach_chain(client)
    wallet, headers = approved
    job_id = _post(client, headers)
    record_escrow(session, job_id, clock, deadline_in_s=3600)

    # Spent on chain before the watcher recorded it: "spent", not "locked".
    chain.spent.add((ESCROW_TX, 0))
    body = _escrow(client, job_id, headers)
    assert body["state"] == "spent" and "not recorded" in body["note"]
    assert body["cancel"]["possible"] is False and body["refund"]["possible"] is False

    settle = "5e" * 32
    for out, (kind, address, ntx) in enumerate(
        (("payout", Wallet().address, 700_000), ("refund", wallet.address, 300_000))
    ):
        add_movement(
            session,
            address=address,
            ntx=ntx,
            tx_hash=settle,
            kind=kind,
            job_id=job_id,
            escrow=(ESCROW_TX, 0),
            output_index=out,
            block_height=7,
        )
    clear_caches()
    # Another browser, another sign-in: the same state, from the API.
    other_session = sign_in(client, wallet)
    body = _escrow(client, job_id, other_session)
    assert body["state"] == "settled"
    closing = body["closing"]
    assert (closing["action"], closing["tx_hash"], closing["block_height"]) == (
        "settle",
        settle,
        7,
    )
    assert (closing["paid_ntx"], closing["returned_ntx"]) == (700_000, 300_000)
    assert closing["explorer"]["devnet"].endswith(f"/explorer/tx/{settle}")


def test_someone_elses_job_reads_as_missing(
    client: TestClient, approved: tuple[Wallet, dict[str, str]], session: Session, clock: FakeClock
) -> None:
    attach_chain(client)
    _wallet, headers = approved
    job_id = _post(client, headers)
    record_escrow(session, job_id, clock, deadline_in_s=60)
    stranger = sign_in(client, Wallet())
    assert client.get(f"/api/v1/jobs/{job_id}/escrow", headers=stranger).status_code == 404
    build = client.post(f"/api/v1/jobs/{job_id}/escrow/cancel/build", json={}, headers=stranger)
    assert build.status_code in (404, 503)


def test_the_network_tells_clients_how_to_show_amounts_and_which_wallets_fit(
    client: TestClient,
) -> None:
    attach_chain(client)
    body = client.get("/api/v1/network").json()
    assert body["network"] == "devnet" and body["network_id"] == 0
    assert body["ntx"] == {"ticker": "NTX", "decimals": 6, "unit": "ab" * 28 + "4e5458"}
    assert body["explorer"] == {"devnet": "http://127.0.0.1:3030/explorer/tx/{tx}"}
