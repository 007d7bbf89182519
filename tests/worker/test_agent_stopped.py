"""A job stopped for its fault, driven through a real agent (process runtime), the real API
and the oracle's pipeline over the API's feed.

The provider trains with its checkpoint uploader on; once checkpoint 3 is committed and
uploaded, the oracle quorum (one oracle, threshold 1 here: the quorum itself is played by
tests/api/test_job_faults.py) posts its signed early job-fault verdict. The API stops the
lease; the worker's next heartbeat says so, it kills the run, makes its committed prefix
the manifest, uploads it and attests the segments committed: paid their share of the price
(`stopped_share`), never the whole. The oracle's pipeline verifies that amount over the
API's feed (which says the lease was stopped) and refuses the same attestation claiming the
whole price.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from agent_fixtures import (  # noqa: F401  (fixtures)
    NETWORK,
    AgentHarness,
    ApiServer,
    FixtureRepo,
    RecordingOracle,
    job_path,
    job_spec,
    oracle,
)
from test_agent_resume import (  # noqa: F401  (fixtures)
    EVERY,
    ORACLE,
    PAUSE_AT,
    STEPS,
    api_server,
    oracle_context,
    paced_repo,
    wait_for,
)

from oracle.intake.feed_client import HttpApiFeed
from oracle.verification.verify import Reason, verify
from pot import Manifest
from pot.manifest import PREFIX_NAME
from proofnet.messages.attestation import EscrowRef, sign_attestation
from proofnet.messages.job_fault import JobFaultVerdict
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.segment_share import stopped_share


def test_a_job_stopped_for_its_fault_is_attested_for_its_committed_segments(
    tmp_path: Path,
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    paced_repo: FixtureRepo,  # noqa: F811
    job_path: None,  # noqa: F811
) -> None:
    from worker.runtime.process_runtime import ProcessRuntime

    gate = tmp_path / "gate"  # never opened: the run waits at step PAUSE_AT until stopped
    spec = job_spec(paced_repo, steps=STEPS)
    spec["proof"]["config"] = {"gate": str(gate), "pause_at": PAUSE_AT}
    spec["proof"]["steps_per_checkpoint"] = EVERY
    job_id = api_server.submit(spec)
    price = spec["pricing"]["amount"]
    provider = AgentHarness(
        tmp_path / "a", api_server, oracle, paced_repo, ProcessRuntime(), checkpoint_upload_s=0.1
    )
    feed = HttpApiFeed(api_server.url, ORACLE, NETWORK, ttl_s=0)
    try:
        outcomes: list[Any] = []
        runner = threading.Thread(
            target=lambda: outcomes.extend(provider.agent.run(once=True).outcomes)
        )
        runner.start()

        def logs() -> list[str]:
            lines = api_server.get(f"/api/v1/jobs/{job_id}/logs")["lines"]
            return [str(line["text"]) for line in lines]

        wait_for("checkpoint 3 uploaded", lambda: any("uploaded checkpoint 3" in t for t in logs()))
        (commit,) = [c for c in feed.early_commits() if c.job_id == job_id]
        verdict = JobFaultVerdict.sign(
            ORACLE,
            job_id=job_id,
            nonce=commit.nonce,
            attempt=commit.attempt,
            reason="job_not_replayable",
            message="the two replays of segment 1 disagree",
            prefix_root="ab" * 32,
        )
        state = feed.post_job_fault(verdict)
        assert state["stopped"] is True, state
        stop_segments = state["stop"]["segments"]
        assert stop_segments >= 3

        runner.join(timeout=120)
        assert outcomes and outcomes[0].status == "attested", outcomes
        assert any("the lease was stopped (job_fault)" in t for t in logs()), logs()
        view = api_server.job(job_id)
        assert view["progress_message"].startswith("stopped: job's fault: ")

        att = oracle.accepted[job_id][-1]
        job_dir = provider.config.jobs_dir / f"{job_id}-a1"
        manifest = Manifest.load(job_dir / "pot")
        prefix = Manifest.load(job_dir / "pot", name=PREFIX_NAME)
        assert manifest == prefix and att.pot_root == manifest.root
        committed = manifest.segments
        assert stop_segments <= committed < 6
        parsed = JobSpec.from_dict(spec)
        share = stopped_share(parsed, price, 1, stop_segments, committed)
        assert att.amount == share < price
        # It says it claims the stopped share: the settlement publishes the stop's evidence.
        assert att.stop is not None and att.stop.segments == stop_segments

        ref = att.domain.escrow
        ctx = oracle_context(job_id, EscrowRef(tx_id=ref.tx_id, index=ref.index), price, feed)
        verified = verify(oracle.cose[job_id], ctx)
        assert verified.ok, verified
        assert verified.stop is not None and verified.stop.segments == stop_segments
        assert {v.nonce for v in verified.stop.verdicts} == {att.nonce}
        # The attack twin: the same partial run claiming the whole price.
        greedy = sign_attestation(
            att.model_copy(update={"amount": price}), provider.worker.key.signing_key
        ).cose
        refused = verify(greedy, ctx)
        assert refused.reason == Reason.AMOUNT_EXCEEDS_PRICE, refused
    finally:
        feed.close()
        gate.write_text("go")
        provider.close()
