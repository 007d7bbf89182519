"""A long job resumes on a second provider, driven through two real agents (process
runtime), the real API and the recording oracle.

Provider A trains with its checkpoint uploader on: each committed checkpoint reaches the
API while the job runs (A's log says so before anything else ends the run). A is then
stopped mid-run and releases. Provider B's claim resumes from the last checkpoint A
uploaded: B downloads it, trains the remaining segments, and attests only its share of the
price (the segments it proved), never A's. Its proof chains to A's committed prefix
(`pot.check_resumed`): the oracle's own pipeline, reading the API's signed feed (the
attempts, the lost attempt's prefix by the hash the API recorded), verifies it; the same
attestation claiming the whole price is refused (a forged resume checkpoint:
tests/oracle/test_verify_resumed.py).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from agent_fixtures import (  # noqa: F401  (fixtures)
    NETWORK,
    AgentHarness,
    ApiServer,
    FixtureRepo,
    RecordingOracle,
    _git,
    job_path,
    job_spec,
    make_api_server,
    oracle,
)
from nacl.signing import SigningKey

from chain.contracts import types as t
from oracle.inputs.chain import EscrowLookup, EscrowOutput, StaticChainView
from oracle.intake.feed_client import HttpApiFeed
from oracle.service import escrow_script_hash
from oracle.verification.verify import Reason, VerificationContext, verify
from pot import Manifest, check_resumed
from pot.manifest import PREFIX_NAME
from proofnet.messages.address import key_hash
from proofnet.messages.attestation import EscrowRef, sign_attestation
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.result_paths import attempt_result_name
from proofnet.messages.segment_share import segment_cap

# The job's trainer, paced: it stops before step `pause_at` until the file `gate` exists,
# so the test can end provider A's run after some checkpoints are committed, whatever the
# machine's speed.
PACED_PY = '''"""The numpy MLP, paused at one step until a file exists (a test's pacing)."""
import os
import time

from pot.examples.numpy_mlp import MLPTrainer as _MLP


class MLPTrainer(_MLP):
    def train_step(self, step, indices):
        gate = self.ctx.config.get("gate")
        if gate and step == int(self.ctx.config.get("pause_at", 0)):
            while not os.path.exists(gate):
                time.sleep(0.05)
        return super().train_step(step, indices)
'''
STEPS, EVERY, PAUSE_AT = 60, 10, 35  # 6 segments; A commits checkpoints 1..3, then waits
ORACLE = SigningKey(b"\x0b" * 32)


@pytest.fixture
def api_server(tmp_path: Path) -> Iterator[ApiServer]:
    """The API, serving its oracle feed to ORACLE's key."""
    yield from make_api_server(tmp_path, oracle_keys=(bytes(ORACLE.verify_key).hex(),))


class _Store:
    """The oracle's store as a first verification sees it: nothing recorded yet."""

    def holder_of_leaf(self, leaf_hash: str) -> int | None:
        return None

    def payable_for_escrow(self, escrow: str) -> tuple[int, str] | None:
        return None

    def payable_units(self, escrow: str) -> dict[int, Any]:
        return {}

    def cancelled_escrow(self, escrow: str) -> str | None:
        return None


def oracle_context(job_id: str, ref: EscrowRef, budget: int, feed: HttpApiFeed) -> Any:
    """The oracle's verification over the API's real feed; the escrow (which the worker
    fixtures record without a chain) is an output on a static chain view."""
    pkh = key_hash(bytes(SigningKey.generate().verify_key))
    datum = t.EscrowDatum(
        batch_credential=b"\x11" * 28,
        job_id=bytes.fromhex(job_id),
        submitter=t.Address(t.PubKeyCredential(pkh), t.NoStakingCredential()),
        submitter_pkh=pkh,
        budget=budget,
        ntx_policy=b"\xab" * 28,
        ntx_name=b"NTX",
        deadline=int(time.time() * 1000) + 3_600_000,
        config_policy=b"\x22" * 28,
        config_name=t.CONFIG_NFT_NAME,
        cancel_allowed_until=t.NoPosixTime(),
        nonce=0,
        oracle_set=bytes(32),
    )
    chain = StaticChainView()
    output = EscrowOutput(
        ref=ref,
        address="addr_test1-escrow",
        payment_script_hash=escrow_script_hash(),
        lovelace=5_000_000,
        assets=MappingProxyType({"ab" * 28 + "4e5458": budget}),
        datum=datum,
        datum_error="",
    )
    chain.put(EscrowLookup("unspent", output), ref)
    return VerificationContext(
        network=NETWORK,
        escrow_script_hash=escrow_script_hash(),
        chain=chain,
        feed=feed,
        store=_Store(),
    )


@pytest.fixture(scope="module")
def paced_repo(tmp_path_factory: pytest.TempPathFactory) -> FixtureRepo:
    root = tmp_path_factory.mktemp("git")
    repo = root / "numpy-mlp.git"
    repo.mkdir()
    _git(repo, "init", "--quiet")
    (repo / "mlp.py").write_text(PACED_PY)
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "-m", "paced trainer")
    return FixtureRepo(
        path=repo,
        commit=_git(repo, "rev-parse", "HEAD"),
        rewrites={"https://git.example.test/": f"file://{root}/"},
    )


def wait_for(what: str, check: Any, timeout_s: float = 120.0) -> Any:
    """Poll `check` until it returns something truthy (events, not fixed sleeps)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_stopped_provider_is_resumed_and_the_next_one_claims_only_its_share(
    tmp_path: Path,
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    paced_repo: FixtureRepo,
    job_path: None,  # noqa: F811
) -> None:
    from worker.runtime.process_runtime import ProcessRuntime

    gate = tmp_path / "gate"
    spec = job_spec(paced_repo, steps=STEPS)
    spec["proof"]["config"] = {"gate": str(gate), "pause_at": PAUSE_AT}
    spec["proof"]["steps_per_checkpoint"] = EVERY
    job_id = api_server.submit(spec)
    price = spec["pricing"]["amount"]

    first = AgentHarness(
        tmp_path / "a", api_server, oracle, paced_repo, ProcessRuntime(), checkpoint_upload_s=0.1
    )
    second = AgentHarness(tmp_path / "b", api_server, oracle, paced_repo, ProcessRuntime())
    try:
        outcomes: list[Any] = []
        runner = threading.Thread(
            target=lambda: outcomes.extend(first.agent.run(once=True).outcomes)
        )
        runner.start()

        def logs() -> list[str]:
            lines = api_server.get(f"/api/v1/jobs/{job_id}/logs")["lines"]
            return [str(line["text"]) for line in lines]

        # Checkpoint 3 (step 30) is committed and shipped while the job still runs.
        wait_for(
            "A's upload of checkpoint 3", lambda: any("uploaded checkpoint 3" in t for t in logs())
        )
        first.agent.stop_now()
        runner.join(timeout=120)
        assert outcomes and outcomes[0].status == "released", outcomes
        gate.write_text("go")

        outcome = second.agent.run(once=True).outcomes[0]
        assert outcome.status == "attested", outcome.reason
        claim_log = [t for t in logs() if "resuming attempt 1 at checkpoint" in t]
        assert claim_log, logs()
        at = int(claim_log[0].split("at checkpoint ")[1].split(" ")[0])
        assert at >= 3

        att = oracle.accepted[job_id][-1]
        parsed = JobSpec.from_dict(spec)
        assert att.worker_key == second.worker.key.public_key_hex
        # Paid for segments at+1..6 only: the share, never the whole price.
        assert att.amount == segment_cap(parsed, price, at + 1) == price * (6 - at) // 6
        # The proof chains to the prefix A committed, as the oracle checks it.
        b_dir = second.config.jobs_dir / f"{job_id}-a2"
        resumed = Manifest.load(b_dir / "pot")
        assert resumed.root == att.pot_root
        prefix = Manifest.load(b_dir / ".proofnet" / "resume", name=PREFIX_NAME)
        check_resumed(resumed, prefix, at, step=at * EVERY)
        # The oracle's pipeline over the API's feed: verified, the resume checked.
        feed = HttpApiFeed(api_server.url, ORACLE, NETWORK, ttl_s=0)
        try:
            ref = att.domain.escrow
            ctx = oracle_context(job_id, EscrowRef(tx_id=ref.tx_id, index=ref.index), price, feed)
            verdict = verify(oracle.cose[job_id], ctx)
            assert verdict.ok, verdict
            assert "resumed_from_committed_prefix" in verdict.checks
            # The attack twins: the whole price; a resume the API says began elsewhere.
            key = second.worker.key.signing_key
            greedy = sign_attestation(att.model_copy(update={"amount": price}), key).cose
            refused = verify(greedy, ctx)
            assert refused.reason == Reason.AMOUNT_EXCEEDS_PRICE, refused
            # B names its attempt and segments; A, which never came back, signed its own
            # claim for segments 1..at while it trained, and the API holds it.
            assert att.segments is not None
            assert (att.segments.attempt, att.segments.first, att.segments.last) == (2, at + 1, 6)
            lost = feed.artifact(job_id, attempt_result_name(1, f"pot/claim-{at}.cose"))
            paid_a = verify(lost, ctx)
            assert paid_a.ok, paid_a
            assert paid_a.attestation is not None
            assert paid_a.attestation.worker_key == first.worker.key.public_key_hex
            assert paid_a.attestation.amount == segment_cap(parsed, price, 1, at)
            assert paid_a.attestation.amount + att.amount <= price
        finally:
            feed.close()
        history = api_server.job(job_id)["history"]
        assert [(h["attempt"], h["first_segment"], h["last_segment"]) for h in history] == [
            (1, 1, at),
            (2, at + 1, None),
        ]
        # The prefix B resumed from is the one A's run committed, byte for byte.
        a_dir = first.config.jobs_dir / f"{job_id}-a1"
        a_prefix = Manifest.load(a_dir / "pot", name=PREFIX_NAME)
        assert a_prefix.leaves[: at + 1] == prefix.leaves[: at + 1]
        assert (
            hashlib.sha256(prefix.encode()).hexdigest()
            == hashlib.sha256(
                (b_dir / ".proofnet" / "resume" / PREFIX_NAME).read_bytes()
            ).hexdigest()
        )
    finally:
        first.close()
        second.close()
