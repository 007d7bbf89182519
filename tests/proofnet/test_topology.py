"""Job topologies: relay and multi-node specs validate strictly, and `plan` turns them into the
units the API schedules, the worker runs and the oracle pays."""

from __future__ import annotations

from typing import Any

import pytest

from proofnet.messages.attestation import MalformedAttestation, UnitWork, sign_attestation
from proofnet.messages.canonical import canonical_json
from proofnet.messages.jobspec import JobSpec, JobSpecError
from proofnet.messages.topology import (
    DEFAULT_EVAL_TOLERANCE,
    Evaluation,
    MultiNode,
    Relay,
    final_unit,
    plan,
    total_amount,
)
from tests.proofnet.test_attestation import SK, cose_with_payload, make_att, verify
from tests.proofnet.test_jobspec import spec_dict

SHA = "ef" * 32


def shards(n: int) -> list[dict[str, str]]:
    return [{"uri": f"https://data.example/shard-{i}", "sha256": SHA} for i in range(n)]


def evaluation(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "every": 2,
        "metric": "loss",
        "goal": "min",
        "threshold": "0.5",
        "command": ["python", "eval.py"],
        "data": [{"uri": "https://data.example/holdout", "sha256": SHA}],
        "amount": 10,
    }
    base.update(overrides)
    return base


def relay(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": "relay",
        "stages": [
            {"shards": [0]},
            {"shards": [1], "after": [0]},
            {"shards": [2], "after": [1]},
        ],
        "checkpoint": "model.npz",
        "stage_amount": 100,
    }
    base.update(overrides)
    return base


def topology_spec(topology: dict[str, Any], amount: int, **overrides: Any) -> dict[str, Any]:
    return spec_dict(
        data=shards(4),
        topology=topology,
        pricing={"kind": "fixed", "amount": amount},
        **overrides,
    )


def test_chain_with_evaluation_plans_gated_units() -> None:
    topo = Relay.model_validate(relay(evaluation=evaluation()))
    units = plan(topo)
    assert [(u.index, u.kind) for u in units] == [
        (0, "stage"),
        (1, "stage"),
        (2, "stage"),
        (3, "eval"),
        (4, "eval"),
    ]
    # Stage 1 is at depth 2 (evaluated every 2); stage 2 is the final model (always).
    assert units[3].evaluates == 1 and units[4].evaluates == 2
    # Stage 2 builds on stage 1's checkpoint and waits for its evaluation to pass.
    assert units[2].inputs == (1,) and units[2].after == (1, 3)
    assert units[0].after == () and units[0].inputs == ()
    assert total_amount(topo) == 3 * 100 + 2 * 10
    assert final_unit(topo) == 2


def test_branches_average_into_an_aggregation_unit() -> None:
    topo = Relay.model_validate(
        relay(
            stages=[{"shards": [0]}, {"shards": [1]}, {"shards": [2], "after": [0]}],
            aggregation="average",
            aggregate_command=["python", "average.py"],
            aggregate_amount=7,
        )
    )
    units = plan(topo)
    aggregate = units[3]
    assert aggregate.kind == "aggregate" and aggregate.inputs == (1, 2)
    assert final_unit(topo) == 3
    assert total_amount(topo) == 307


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"stages": [{"shards": [0], "after": [0]}]}, "earlier stages"),
        ({"stages": [{"shards": [0]}, {"shards": [1], "after": [0, 0]}]}, "twice"),
        ({"stages": [{"shards": [0]}, {"shards": [1]}]}, "exactly one last stage"),
        ({"aggregation": "average", "aggregate_command": ["x"], "aggregate_amount": 1}, "two"),
        ({"checkpoint": "../model.npz"}, "plain file name"),
        ({"stages": [{"shards": []}]}, "at least 1"),
    ],
)
def test_relay_shapes_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Relay.model_validate(relay(**changes))


def test_spec_price_must_equal_the_units_total() -> None:
    spec = JobSpec.from_dict(topology_spec(relay(), 300))
    assert isinstance(spec.topology, Relay)
    with pytest.raises(JobSpecError, match=r"must equal what paying every unit costs \(300\)"):
        JobSpec.from_dict(topology_spec(relay(), 301))
    rate_card = {"kind": "rate_card", "rate_card": "sha256:" + "ab" * 32, "max_amount": 300}
    with pytest.raises(JobSpecError, match="pricing must be 'fixed'"):
        JobSpec.from_dict(spec_dict(data=shards(4), topology=relay(), pricing=rate_card))


def test_stage_shards_must_index_the_data() -> None:
    topo = relay(stages=[{"shards": [0, 9]}])
    with pytest.raises(JobSpecError, match=r"shards \[9\] are not indices into data"):
        JobSpec.from_dict(topology_spec(topo, 100))


def test_multi_node_plan_and_limits() -> None:
    topo = MultiNode.model_validate({"kind": "multi_node", "nodes": 3, "node_amount": 50})
    units = plan(topo)
    assert [(u.index, u.kind, u.rank) for u in units] == [
        (0, "node", 0),
        (1, "node", 1),
        (2, "node", 2),
    ]
    spec = JobSpec.from_dict(topology_spec(topo.model_dump(), 150))
    assert spec.max_amount == 150
    with pytest.raises(JobSpecError, match="nproc_per_node exceeds"):
        bad = {"kind": "multi_node", "nodes": 2, "node_amount": 1, "nproc_per_node": 4}
        JobSpec.from_dict(topology_spec(bad, 2))
    with pytest.raises(ValueError, match="greater than or equal to 2"):
        MultiNode.model_validate({"kind": "multi_node", "nodes": 1, "node_amount": 1})


def test_single_unit_specs_keep_their_encoding_and_job_id() -> None:
    spec = JobSpec.from_dict(spec_dict())
    assert b"topology" not in spec.canonical_bytes()
    body = spec.model_dump(mode="python")
    for absent in ("topology", "min_bond", "destinations", "storage"):  # later optional fields
        del body[absent]
    for unset in ("trainer", "config", "schedule"):  # the harness's fields, likewise
        del body["proof"][unset]
    assert spec.canonical_bytes() == canonical_json(body)
    relay_spec = JobSpec.from_dict(topology_spec(relay(), 300))
    assert b'"topology"' in relay_spec.canonical_bytes()
    assert (
        relay_spec.job_id != JobSpec.from_dict(topology_spec(relay(stage_amount=101), 303)).job_id
    )
    assert JobSpec.from_canonical(relay_spec.canonical_bytes()) == relay_spec


@pytest.mark.parametrize(
    ("value", "goal", "passes"),
    [
        ("0.4", "min", True),
        ("0.5", "min", True),
        ("0.51", "min", False),
        (1, "min", False),
        ("0.6", "max", True),
        ("0.49", "max", False),
        ("NaN", "min", False),
        ("x", "max", False),
    ],
)
def test_evaluation_threshold(value: int | str, goal: str, passes: bool) -> None:
    ev = Evaluation.model_validate(evaluation(goal=goal))
    assert ev.passes(value) is passes


def test_unit_attestation_round_trips_and_null_unit_is_refused() -> None:
    att = make_att()
    unit = UnitWork(index=2, kind="stage", inputs=("aa" * 32,), output="bb" * 32)
    staged = make_att(unit=unit.model_dump())
    got = verify(sign_attestation(staged, SK).cose)
    assert got.unit == unit
    assert got.leaf_hash() != att.leaf_hash()
    # A single-unit attestation has no "unit" key at all...
    assert b'"unit"' not in att.canonical_bytes()
    assert verify(sign_attestation(att, SK).cose).unit is None
    # ...and one that spells it as null is refused (one attestation, one encoding).
    nulled = canonical_json(att.model_dump(mode="python"))
    with pytest.raises(MalformedAttestation, match="absent, not null"):
        verify(cose_with_payload(nulled))
    with pytest.raises(MalformedAttestation, match="kind"):
        verify(
            cose_with_payload(
                canonical_json(
                    {
                        **att.model_dump(mode="python", exclude_none=True),
                        "unit": {"index": 0, "kind": "x"},
                    }
                )
            )
        )


def test_an_evaluation_states_its_tolerance_and_old_specs_keep_their_job_id() -> None:
    """An evaluation's metric is paid within a stated tolerance of a verifier's: unset, it
    is the documented default, and the spec's encoding is the one it had before."""
    topo = relay(evaluation=evaluation())
    spec = JobSpec.from_dict(topology_spec(topo, total_amount(Relay.model_validate(topo))))
    assert b'"tolerance"' not in spec.canonical_bytes()
    assert isinstance(spec.topology, Relay) and spec.topology.evaluation is not None
    ev = spec.topology.evaluation
    assert ev.metric_tolerance == DEFAULT_EVAL_TOLERANCE == "0.001"
    assert ev.within_tolerance("0.25", "0.251")
    assert not ev.within_tolerance("0.25", "0.2511")
    assert not ev.within_tolerance("0.25", "NaN")
    loose = relay(evaluation=evaluation(tolerance="0.1"))
    stated = JobSpec.from_dict(topology_spec(loose, total_amount(Relay.model_validate(loose))))
    assert stated.job_id != spec.job_id
    assert JobSpec.from_canonical(stated.canonical_bytes()) == stated
    with pytest.raises(ValueError, match="never negative"):
        Evaluation.model_validate(evaluation(tolerance="-1"))
