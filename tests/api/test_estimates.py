"""Estimates: ranges from resources, static FLOPs, measured runs; pluggable pricing rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from api_support import Wallet, Worker, job_spec, sign_in
from fastapi.testclient import TestClient

from api.services import pricing
from api.services.estimates import (
    Hints,
    Market,
    Measurement,
    estimate,
    peak_flops,
    workload_of,
)
from api.services.pricing import MarketRate, PricingError, Span, rule_for
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.verification_fee import FEE_PPM, fee_for


def _spec(**overrides: Any) -> JobSpec:
    raw = job_spec(seed=1)
    for key, value in overrides.items():
        if key in raw["resources"]:
            raw["resources"][key] = value
        else:
            raw[key] = value
    return JobSpec.model_validate(raw)


RATE_CARD = {"kind": "rate_card", "rate_card": "sha256:" + "c" * 64, "max_amount": 10**9}


def test_peak_flops_matches_families_longest_first() -> None:
    assert peak_flops("NVIDIA A100-SXM4-80GB") == 312e12
    assert peak_flops("NVIDIA A10G") == 125e12
    assert peak_flops("NVIDIA L40S") == 362e12
    assert peak_flops("NVIDIA GeForce RTX 4090") == 165e12
    assert peak_flops("Mystery Accelerator") is None


def test_resources_only_range_is_bounded_by_max_duration() -> None:
    spec = _spec(max_duration_s=7200)
    e = estimate(spec, Market(("NVIDIA H100 80GB HBM3",), ()), [])
    assert e.basis == "resources"
    assert (e.time_s.low, e.time_s.high) == (0.0, 7200.0)
    assert e.gpu_seconds.high == 7200.0 and e.cpu_seconds.high == 4 * 7200.0
    # A fixed price does not depend on the run time.
    assert (e.cost.rule, e.cost.low, e.cost.high, e.cost.cap) == ("fixed", 10**6, 10**6, 10**6)
    # Of which the verifiers are paid their fee (out of the provider's pay, not on top).
    assert e.cost.verification_fee == (50_000, 50_000) == (fee_for(10**6), fee_for(10**6))
    assert any("max_duration_s bounds the run" in n for n in e.notes)


def test_static_estimate_from_flops() -> None:
    spec = _spec(max_duration_s=10**6, pricing=RATE_CARD, gpu_memory_mb=8192)
    hints = Hints(model_params=10**9, tokens=10**10)  # 6e19 FLOPs
    rates = (MarketRate("p1", "NVIDIA A100 80GB", 3600), MarketRate("p2", "NVIDIA A100 80GB", 7200))
    e = estimate(spec, Market(("NVIDIA A100 80GB",), rates), [], hints)
    assert e.basis == "static"
    # 6e19 / (312e12 x 1 GPU x 50%) .. / 30%
    assert e.time_s.low == pytest.approx(6e19 / (312e12 * 0.5))
    assert e.time_s.high == pytest.approx(6e19 / (312e12 * 0.3))
    # 1 and 2 NTX per GPU-second: cheapest x shortest .. dearest x longest.
    assert e.cost.low == int(e.gpu_seconds.low * 1)
    assert e.cost.high == pytest.approx(e.gpu_seconds.high * 2, abs=1)
    # 16 bytes per parameter for Adam, more with activations.
    assert e.training_memory_mb is not None
    assert e.training_memory_mb.low == pytest.approx(16e9 / 2**20)
    assert any("run out of memory" in n for n in e.notes)  # 8 GB asked, ~15 GB+ needed


def test_static_estimate_past_max_duration_is_flagged_and_capped() -> None:
    spec = _spec(max_duration_s=60)
    e = estimate(spec, Market(("NVIDIA T4",), ()), [], Hints(model_params=10**9, tokens=10**9))
    assert e.time_s.high == 60.0
    assert any("cut off" in n for n in e.notes)


def test_measurement_narrows_the_range() -> None:
    spec = _spec(max_duration_s=10**6, pricing=RATE_CARD)
    hints = Hints(model_params=10**8, tokens=10**10)
    market = Market(("NVIDIA A100 80GB", "NVIDIA H100 80GB"), ())
    static = estimate(spec, market, [], hints)
    measured = estimate(spec, market, [Measurement("NVIDIA A100 80GB", 1, 1000.0, "completed")])
    assert measured.basis == "measured"
    # Same GPU: 1000 s +-5%; on an H100 scaled by peak FLOP/s with +-12%.
    h100 = 1000.0 * 312 / 989
    assert measured.time_s.low == pytest.approx(h100 * 0.88)
    assert measured.time_s.high == pytest.approx(1050.0)
    width = measured.time_s.high / measured.time_s.low
    assert width < static.time_s.high / static.time_s.low


def test_rate_card_cost_without_market_goes_up_to_the_cap() -> None:
    spec = _spec(pricing=RATE_CARD)
    e = estimate(spec, Market((), ()), [])
    assert (e.cost.low, e.cost.high, e.cost.cap) == (0, 10**9, 10**9)
    assert "no fitting provider" in e.cost.basis


def test_pricing_registry_is_pluggable_and_refuses_unknown_kinds() -> None:
    assert set(pricing.registered_rules()) >= {"fixed", "rate_card", "auction"}
    with pytest.raises(PricingError, match="no pricing rule for 'dutch-auction'"):
        rule_for("dutch-auction")

    class Flat:
        name = "test-flat"

        def quote(self, spec: JobSpec, gpu_seconds: Span, rates: Any) -> pricing.Quote:
            return pricing.Quote(self.name, 7, 7, 7, "flat")

    pricing.register_rule(Flat())
    try:
        assert rule_for("test-flat").quote(_spec(), Span(0, 1), []).low == 7
    finally:
        pricing._RULES.pop("test-flat")
    with pytest.raises(PricingError):
        rule_for("fixed").quote(_spec(pricing=RATE_CARD), Span(0, 1), [])


def test_workload_ignores_seed_and_price_but_not_code() -> None:
    a = _spec()
    b = _spec(seed=99, pricing=RATE_CARD, max_duration_s=5)
    c = _spec(commands=[["python", "other.py"]])
    assert workload_of(a) == workload_of(b) == workload_of(a.model_dump(mode="json"))
    assert workload_of(a) != workload_of(c)
    # What the harness trains is the work too: another config or schedule is another workload.
    trained = {
        "trainer": "trainer:Trainer",
        "config": {"lr": "0.1"},
        "schedule": {"steps": 100, "dataset_size": 64, "batch_size": 8},
    }
    d = _spec(proof=trained)
    e = _spec(proof={**trained, "config": {"lr": "0.2"}})
    f = _spec(proof={**trained, "schedule": {"epochs": 3, "dataset_size": 64, "batch_size": 8}})
    assert len({workload_of(a), workload_of(d), workload_of(e), workload_of(f)}) == 4
    assert workload_of(d) == workload_of(_spec(seed=5, proof=trained))


def _register_priced(worker: Worker, client: TestClient) -> str:
    """Register and publish a rate card; its digest."""
    worker.register([("NVIDIA A100 80GB", 81920)])
    response = worker.request(
        "PUT", "/api/v1/worker/rate-card", {"rates": {"NVIDIA A100 80GB": 7200}}
    )
    assert response.status_code == 200, response.text
    return str(response.json()["digest"])


def test_estimate_endpoints(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, auth = approved
    worker = worker_factory()
    digest = _register_priced(worker, client)
    spec = job_spec(gpus=1, gpu_memory_mb=40000)
    spec["pricing"] = {**RATE_CARD, "rate_card": digest}
    body = {"spec": spec, "model_params": 10**8, "tokens": 10**9}
    response = client.post("/api/v1/estimates", json=body, headers=auth)
    assert response.status_code == 200, response.text
    est = response.json()
    assert est["basis"] == "static" and est["gpu_models"] == ["NVIDIA A100 80GB"]
    assert est["cost"]["rule"] == "rate_card" and 0 < est["cost"]["low"] <= est["cost"]["high"]
    # The verifiers' fee is shown, as the part of the cost (not on top) they are paid.
    fee = est["cost"]["verification_fee"]
    assert fee["ppm"] == FEE_PPM and "not on top" in fee["basis"]
    assert (fee["low"], fee["high"]) == (fee_for(est["cost"]["low"]), fee_for(est["cost"]["high"]))
    assert 0 < fee["high"] < est["cost"]["high"]
    assert est["job_id"] == JobSpec.model_validate(spec).job_id

    # Hints come in pairs; anonymous callers are refused.
    half = client.post("/api/v1/estimates", json={"spec": spec, "tokens": 5}, headers=auth)
    assert half.status_code == 400 and "together" in half.json()["detail"]
    assert client.post("/api/v1/estimates", json=body).status_code == 401

    # Post it, run it to completion: the measured run narrows the next spec of the workload.
    posted = client.post("/api/v1/jobs", json={"spec": spec}, headers=auth)
    assert posted.status_code == 201, posted.text
    job_id = posted.json()["job_id"]
    own = client.get(f"/api/v1/jobs/{job_id}/estimate", headers=auth)
    assert own.status_code == 200 and own.json()["basis"] == "resources"
    stranger = sign_in(client, Wallet())
    assert client.get(f"/api/v1/jobs/{job_id}/estimate", headers=stranger).status_code == 404

    claim = worker.claim().json()
    done = worker.request("POST", f"/api/v1/worker/leases/{claim['lease_token']}/complete", {})
    assert done.status_code == 200, done.text
    again = dict(spec, seed=spec["seed"] + 1)
    response = client.post("/api/v1/estimates", json={"spec": again}, headers=auth)
    narrowed = response.json()
    assert narrowed["basis"] == "measured", narrowed
    assert narrowed["measurements"][0]["gpu_model"] == "NVIDIA A100 80GB"
    assert narrowed["time_s"]["high"] <= narrowed["measurements"][0]["projected_s"] * 1.05 + 1e-9
