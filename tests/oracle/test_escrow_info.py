"""`GET /api/v1/escrows/{tx_id}/{index}`: the escrow datum as the oracle reads it on chain."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from oracle_fixtures import BUDGET, World, escrow_datum, escrow_output, make_world

from oracle.app import create_app
from oracle.inputs.chain import ChainUnavailable, EscrowLookup
from proofnet.messages.attestation import EscrowRef
from proofnet.messages.escrow_info import EscrowInfo, escrow_path
from proofnet.settings import Settings


class DownChain:
    def escrow_output(self, ref: EscrowRef) -> EscrowLookup:
        raise ChainUnavailable("backend down")


@pytest.fixture
def world() -> World:
    return make_world()


def client_for(world: World, tmp_path: Path, **ctx: object) -> Iterator[TestClient]:
    app = create_app(
        Settings(),
        context=world.context(**ctx),
        database_url=f"sqlite:///{tmp_path / 'oracle.db'}",
        inline=True,
        sweep_interval_s=3600,
    )
    with TestClient(app) as client:
        yield client


@pytest.fixture
def client(world: World, tmp_path: Path) -> Iterator[TestClient]:
    yield from client_for(world, tmp_path)


def test_an_escrow_is_described_from_its_datum(world: World, client: TestClient) -> None:
    datum = escrow_datum(world.job_id)
    world.set_escrow(EscrowLookup("unspent", escrow_output(world.escrow, datum)))
    response = client.get(escrow_path(world.escrow.tx_id, world.escrow.index))
    assert response.status_code == 200, response.text
    info = EscrowInfo.from_json(response.json())
    assert info == EscrowInfo(
        tx_id=world.escrow.tx_id,
        index=world.escrow.index,
        job_id=world.job_id,
        submitter_pkh=bytes(datum.submitter_pkh).hex(),
        budget=BUDGET,
        deadline_ms=datum.deadline,
        spent_by=None,
    )
    spender = secrets.token_hex(32)
    world.set_escrow(EscrowLookup("spent", escrow_output(world.escrow, datum), spent_by=spender))
    spent = client.get(escrow_path(world.escrow.tx_id, world.escrow.index)).json()
    assert spent["spent_by"] == spender and spent["submitter_pkh"] == info.submitter_pkh


def test_what_is_not_an_escrow_is_not_found(world: World, client: TestClient) -> None:
    path = escrow_path(world.escrow.tx_id, world.escrow.index)
    world.set_escrow(EscrowLookup("missing"))
    assert client.get(path).status_code == 404
    world.set_escrow(
        EscrowLookup(
            "unspent",
            escrow_output(world.escrow, escrow_datum(world.job_id), script_hash="ab" * 28),
        )
    )
    other = client.get(path)
    assert other.status_code == 404 and "not at the escrow script" in other.json()["detail"]
    world.set_escrow(
        EscrowLookup("unspent", escrow_output(world.escrow, None, datum_error="not a datum"))
    )
    no_datum = client.get(path)
    assert no_datum.status_code == 404 and "no escrow datum" in no_datum.json()["detail"]
    assert client.get(escrow_path("XYZ", 0)).status_code == 422
    assert client.get(escrow_path(world.escrow.tx_id, -1)).status_code == 422


def test_an_unreachable_chain_is_a_503(world: World, tmp_path: Path) -> None:
    for client in client_for(world, tmp_path, chain=DownChain()):
        response = client.get(escrow_path(world.escrow.tx_id, world.escrow.index))
        assert response.status_code == 503 and "backend down" in response.json()["detail"]
