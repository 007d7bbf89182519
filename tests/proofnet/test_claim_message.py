"""The claim message (proofnet/messages/claim.py): what the API serves and the worker parses.

The samples in claim_samples/ are answers the API served (captured through its HTTP
routes): they must keep parsing, and re-encode to the very same bytes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from proofnet.messages.claim import (
    Claim,
    ClaimEscrow,
    ClaimUnit,
    ClusterState,
    LeaseAnswer,
    UnitInput,
    check_endpoint,
)
from worker.api_client import BadClaim, parse_claim

SAMPLES = Path(__file__).parent / "claim_samples"
HEX64 = "ab" * 32


def _sample(name: str) -> str:
    return (SAMPLES / name).read_text()


@pytest.mark.parametrize("name", ["relay_stage.json", "cluster_node.json"])
def test_captured_api_claims_parse_and_reencode_byte_for_byte(name: str) -> None:
    raw = _sample(name)
    claim = Claim.model_validate_json(raw)
    assert claim.model_dump_json() == raw
    # The worker reads JSON it decoded itself (a dict): the same claim either way.
    assert Claim.model_validate(json.loads(raw)) == claim
    assert claim.expires_at == datetime(2026, 3, 4, 5, 8, 7, tzinfo=UTC)


def test_the_worker_checks_a_captured_node_claim_against_the_spec() -> None:
    claimed = parse_claim(json.loads(_sample("cluster_node.json")))
    assert claimed.unit is not None and claimed.unit.kind == "node"
    cluster = claimed.unit.cluster
    assert cluster is not None and cluster.world_size == 2 and not cluster.ready
    assert claimed.escrow is None and claimed.sealing is None

    stage = parse_claim(json.loads(_sample("relay_stage.json")))
    assert stage.unit is not None
    assert [i.unit for i in stage.unit.inputs] == [0]
    assert stage.unit.input_hashes == (stage.unit.inputs[0].sha256,)


def _claim(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "job_id": HEX64,
        "spec": {"version": 1},
        "lease_token": "tok",
        "nonce": "n" * 8,
        "attempt": 1,
        "expires_at": "2026-03-04T05:08:07Z",
        "lease_ttl_s": 120,
        "escrow": {"network": "devnet", "script_hash": "cd" * 28, "tx_id": HEX64, "index": 2},
        "sealing": None,
        "unit": {
            "index": 1,
            "kind": "stage",
            "inputs": [{"unit": 0, "sha256": HEX64, "size": 5}],
            "shards": [1],
            "amount": 100,
            "evaluates": None,
            "rank": None,
            "cluster": None,
        },
        "resume": None,
    }
    body.update(overrides)
    return body


def test_round_trip_keeps_nulls_and_field_order() -> None:
    claim = Claim.model_validate(_claim())
    dumped = json.loads(claim.model_dump_json())
    assert dumped == _claim()
    assert list(dumped) == list(_claim())
    assert claim.escrow is not None and claim.escrow.ref.index == 2
    assert claim.unit is not None and claim.unit.inputs == (
        UnitInput(unit=0, sha256=HEX64, size=5),
    )


def test_absent_optional_fields_read_as_null_and_are_sent_as_null() -> None:
    body = _claim()
    for key in ("escrow", "sealing", "unit"):
        del body[key]
    claim = Claim.model_validate(body)
    assert claim.escrow is None and claim.sealing is None and claim.unit is None
    assert '"escrow":null,"sealing":null,"unit":null' in claim.model_dump_json()


def test_unknown_fields_from_a_newer_api_are_ignored() -> None:
    unit = {**_claim()["unit"], "priority": 3}
    body = _claim(unit=unit, region="eu-west", escrow={**_claim()["escrow"], "extra": 1})
    claim = Claim.model_validate(body)
    assert "region" not in claim.model_dump()
    assert claim.unit is not None and "priority" not in claim.unit.model_dump()
    answer = LeaseAnswer.model_validate(
        {
            "job_id": HEX64,
            "status": "running",
            "expires_at": "2026-03-04T05:08:07Z",
            "outcome": None,
            "cluster": None,
            "queue_position": 4,
        }
    )
    assert answer.status == "running"


@pytest.mark.parametrize(
    ("override", "where"),
    [
        ({"attempt": "1"}, "attempt"),
        ({"attempt": True}, "attempt"),
        ({"lease_ttl_s": 0}, "lease_ttl_s"),
        ({"job_id": "J" * 64}, "job_id"),
        ({"lease_token": ""}, "lease_token"),
        ({"expires_at": "tomorrow"}, "expires_at"),
        ({"spec": []}, "spec"),
        (
            {"escrow": {"network": "moon", "script_hash": "cd" * 28, "tx_id": HEX64, "index": 0}},
            "escrow.network",
        ),
        (
            {"escrow": {"network": "devnet", "script_hash": "cd", "tx_id": HEX64, "index": 0}},
            "escrow.script_hash",
        ),
        ({"unit": {**_claim()["unit"], "kind": "party"}}, "unit.kind"),
        ({"unit": {**_claim()["unit"], "shards": ["1"]}}, "unit.shards.0"),
        (
            {"unit": {**_claim()["unit"], "inputs": [{"unit": 0, "sha256": "x", "size": 1}]}},
            "unit.inputs.0.sha256",
        ),
        (
            {"unit": {**_claim()["unit"], "inputs": [{"unit": 0, "sha256": HEX64, "size": -1}]}},
            "unit.inputs.0.size",
        ),
    ],
)
def test_malformed_values_are_refused_naming_the_field(
    override: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        Claim.model_validate(_claim(**override))
    locs = {".".join(str(p) for p in e["loc"]) for e in caught.value.errors()}
    assert any(loc.startswith(where) for loc in locs), locs


def test_missing_required_fields_are_refused() -> None:
    body = _claim()
    del body["lease_token"]
    with pytest.raises(ValidationError, match="lease_token"):
        Claim.model_validate(body)


def test_the_worker_turns_a_malformed_claim_into_bad_claim() -> None:
    with pytest.raises(BadClaim, match=r"malformed: attempt"):
        parse_claim(_claim(attempt="one"))
    with pytest.raises(BadClaim, match="malformed"):
        parse_claim(["not", "an", "object"])


CLUSTER = {"state": "waiting", "world_size": 2, "rank": 1, "endpoint": None, "rdzv_id": "j-1"}


def test_cluster_state_checks_rank_endpoint_and_rendezvous_id() -> None:
    assert not ClusterState.model_validate(CLUSTER).ready
    ready = ClusterState.model_validate({**CLUSTER, "state": "ready", "endpoint": "[::1]:29500"})
    assert ready.ready
    for bad in (
        {"rank": 2},
        {"world_size": 0, "rank": 0},
        {"endpoint": "10.0.0.1"},
        {"endpoint": "10.0.0.1:0"},
        {"endpoint": "10.0.0.1:70000"},
        {"rdzv_id": "a b"},
        {"state": "gone"},
    ):
        with pytest.raises(ValidationError):
            ClusterState.model_validate({**CLUSTER, **bad})
    assert check_endpoint("node-1.cluster:29500") == "node-1.cluster:29500"


def test_models_are_frozen() -> None:
    escrow = ClaimEscrow(network="devnet", script_hash="cd" * 28, tx_id=HEX64, index=0)
    with pytest.raises(ValidationError):
        escrow.index = 1  # type: ignore[misc]
    unit = ClaimUnit(index=0, kind="node", amount=1, rank=0, cluster=None)
    assert unit.inputs == () and unit.shards == ()
