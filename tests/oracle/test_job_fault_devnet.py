"""A job stopped for its fault, end to end on a running devnet: a real escrow at the escrow
script, the real API app serving the oracle feed, the real oracle app verifying over HTTP.

The provider trains and uploads its committed prefix (2 of 4 segments); the oracle (its own
key, the deployment's one oracle: threshold 1) posts its signed early job-fault verdict; the
API stops the lease and the heartbeat says so; the provider attests its committed segments
as a partial proof. The oracle verifies it for the stopped share (half the price: the rest
of the escrow refunds to the submitter when it settles, tests/oracle/test_settlement_devnet.py)
and refuses the same attestation claiming the whole price. (The partial manifest's schedule
checks and replays: tests/oracle/test_verify_stopped.py; the quorum's attacks:
tests/api/test_job_faults.py.)
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
from nacl.signing import SigningKey
from test_intake_devnet import (
    PRICE,
    Signed,
    attestation,
    recorded_run,
    register,
    spec_of,
    stack,
)

from chain.devnet.testing import RunningDevnet
from oracle.intake.feed_client import HttpApiFeed
from oracle.keys import load_key
from pot.manifest import PREFIX_NAME, Manifest
from proofnet.messages.attestation import StopClaim
from proofnet.messages.job_fault import JobFaultVerdict
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.segment_share import stopped_share

NETWORK = "devnet"


@pytest.mark.slow
def test_a_job_stopped_for_its_fault_pays_its_committed_share_end_to_end(
    devnet: RunningDevnet, tmp_path: Path
) -> None:
    spec_dict = spec_of([{"path": "pot/**", "kind": "model"}])
    spec_dict["proof"] = {  # 4 segments, as `recorded_run` trains them
        "steps_per_checkpoint": 10,
        "schedule": {"steps": 40, "dataset_size": 128, "batch_size": 16},
    }
    spec = JobSpec.from_dict(spec_dict)
    with stack(devnet, tmp_path) as world:
        job_id, escrow = world.submit(spec_dict)
        provider = Signed(world.http, SigningKey.generate())
        payout = register(provider)
        claim = provider.call("POST", "/api/v1/worker/claim").json()
        token = claim["lease_token"]
        started = int(time.time() * 1000)
        pot_dir = recorded_run(tmp_path / "run", 2)  # segments 1..2 committed, then stopped

        def upload() -> dict[str, str]:
            digests = {}
            for path in sorted(pot_dir.iterdir()):
                data = path.read_bytes()
                put = provider.call(
                    "PUT", f"/api/v1/worker/leases/{token}/results/pot/{path.name}", data
                )
                assert put.status_code == 200, put.text
                digests[f"pot/{path.name}"] = hashlib.sha256(data).hexdigest()
            return digests

        def beat() -> dict[str, object]:
            answer = provider.call(
                "POST",
                f"/api/v1/worker/leases/{token}/heartbeat",
                b"{}",
                **{"content-type": "application/json"},
            )
            assert answer.status_code == 200, answer.text
            return dict(answer.json())

        upload()
        assert beat()["stop"] is None
        # The oracle's early replay found the job at fault: it signs and posts its verdict.
        oracle_key = load_key(tmp_path / "oracle.skey").signing_key
        verdict = JobFaultVerdict.sign(
            oracle_key,
            job_id=job_id,
            nonce=claim["nonce"],
            attempt=claim["attempt"],
            reason="job_not_replayable",
            message="the two replays of segment 1 disagree",
            prefix_root=Manifest.load(pot_dir, name=PREFIX_NAME).root,
        )
        feed = HttpApiFeed(str(world.http.base_url), oracle_key, NETWORK, ttl_s=0)
        try:
            state = feed.post_job_fault(verdict)
        finally:
            feed.close()
        assert state["stopped"] is True, state
        stop = beat()["stop"]
        assert isinstance(stop, dict) and stop["reason"] == "job_fault" and stop["segments"] == 2

        # The worker makes its prefix the manifest and attests the committed segments.
        Manifest.load(pot_dir, name=PREFIX_NAME).save(pot_dir)
        upload()
        ended = int(time.time() * 1000)
        done = provider.call(
            "POST",
            f"/api/v1/worker/leases/{token}/complete",
            json.dumps({"result": {}}).encode(),
            **{"content-type": "application/json"},
        )
        assert done.status_code == 200, done.text
        share = stopped_share(spec, PRICE, 1, 2, committed=2)
        assert share == PRICE // 2
        att = attestation(
            provider,
            payout,
            job_id,
            escrow,
            spec,
            nonce=claim["nonce"],
            started=started,
            ended=ended,
            results={},
            pot_root=Manifest.load(pot_dir).root,
            amount=share,
        ).model_copy(update={"stop": StopClaim(segments=2)})  # as the heartbeat told it
        greedy = world.attest(att.model_copy(update={"amount": PRICE}), provider.key)
        assert greedy["status"] == "rejected", greedy
        assert greedy["reason"] == "amount_exceeds_price"
        hidden = world.attest(att.model_copy(update={"stop": None}), provider.key)
        assert hidden["status"] == "rejected" and hidden["reason"] == "stop_claim_mismatch"
        honest = world.attest(att, provider.key)
        assert honest["status"] == "verified", honest
