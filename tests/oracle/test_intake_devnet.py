"""End to end on a running devnet: a real escrow locked at the escrow script, the real API
app (SQLite) serving the oracle feed, the real oracle app verifying over HTTP."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from escrow_chain import deployment
from nacl.signing import SigningKey
from pycardano import (
    Address,
    Asset,
    AssetName,
    MultiAsset,
    Network,
    PaymentSigningKey,
    ScriptHash,
    TransactionBuilder,
    TransactionOutput,
    Value,
)
from pycardano.cip import cip8

from api.app import create_app as create_api
from api.config import ApiConfig
from api.db import make_engine as make_api_engine
from api.db import open_session
from api.migrate import upgrade_head
from api.services.users import add_senior
from api.storage import LocalBlobStore
from chain.contracts import types as t
from chain.devnet.node_bridge import NodeBridge, node_bridge
from chain.devnet.testing import RunningDevnet, serve_app
from chain.offchain.backends import NodeChainContext
from oracle.app import create_app as create_oracle
from oracle.keys import write_key
from oracle.metrics import OracleMetrics
from oracle.service import context_from_settings, escrow_script_hash
from proofnet.messages.address import key_hash
from proofnet.messages.attestation import (
    Attestation,
    AttestationDomain,
    EscrowRef,
    SegmentClaim,
    sign_attestation,
)
from proofnet.messages.binding import binding_message
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.segment_share import segment_cap
from proofnet.messages.worker_auth import sign_request_headers
from proofnet.settings import Settings

NETWORK = "devnet"
NTX_NAME = b"NTX"
PRICE = 1_000_000
BUDGET = 1_500_000


class Signed:
    """A worker's signed HTTP calls to the API."""

    def __init__(self, http: httpx.Client, key: SigningKey) -> None:
        self.http, self.key = http, key

    @property
    def public_key(self) -> str:
        return bytes(self.key.verify_key).hex()

    def call(self, method: str, path: str, body: bytes = b"", **headers: str) -> httpx.Response:
        signed = sign_request_headers(
            self.key, network=NETWORK, method=method, path=path, body=body
        )
        return self.http.request(method, path, content=body, headers={**signed, **headers})


def sign_in(http: httpx.Client, skey: PaymentSigningKey, address: str) -> dict[str, str]:
    challenge = http.post("/api/v1/auth/challenge", json={"address": address}).json()
    signed = cip8.sign(challenge["message"], skey, attach_cose_key=True, network=Network.TESTNET)
    assert isinstance(signed, dict)
    verify = http.post(
        "/api/v1/auth/verify",
        json={"address": address, "nonce": challenge["nonce"], **signed},
    )
    assert verify.status_code == 200, verify.text
    return {"Authorization": f"Bearer {verify.json()['access_token']}"}


def lock_escrow(
    devnet: RunningDevnet, skey: PaymentSigningKey, job_id: str, policy: str
) -> EscrowRef:
    """An output at the escrow script holding the NTX budget under an inline EscrowDatum."""
    context = devnet.chain_context()
    vkey = skey.to_verification_key()
    address = Address(vkey.hash(), network=Network.TESTNET)
    funded = devnet.fund(str(address), lovelace=20_000_000, assets={NTX_NAME.hex(): BUDGET})
    devnet.wait_for_tx(funded)
    pkh = vkey.hash().payload
    datum = t.EscrowDatum(
        batch_credential=b"\x11" * 28,
        job_id=bytes.fromhex(job_id),
        submitter=t.Address(t.PubKeyCredential(pkh), t.NoStakingCredential()),
        submitter_pkh=pkh,
        budget=BUDGET,
        ntx_policy=bytes.fromhex(policy),
        ntx_name=NTX_NAME,
        deadline=int(time.time() * 1000) + 2 * 3_600_000,
        config_policy=b"\x22" * 28,
        config_name=t.CONFIG_NFT_NAME,
        cancel_allowed_until=t.NoPosixTime(),
        nonce=0,
        oracle_set=bytes(32),
    )
    escrow_address = Address(
        ScriptHash(bytes.fromhex(escrow_script_hash())), network=Network.TESTNET
    )
    ntx = MultiAsset({ScriptHash(bytes.fromhex(policy)): Asset({AssetName(NTX_NAME): BUDGET})})
    builder = TransactionBuilder(context)
    builder.add_input_address(address)
    builder.add_output(TransactionOutput(escrow_address, Value(3_000_000, ntx), datum=datum))
    tx = builder.build_and_sign([skey], change_address=address)
    context.submit_tx(tx)
    devnet.wait_for_tx(str(tx.id))
    return EscrowRef(tx_id=str(tx.id), index=0)


def register(worker: Signed, uuid: str = "GPU-1") -> str:
    """Register `worker` with one checked H100 and a fresh payout address; that address."""
    payout_key = SigningKey.generate()
    payout = str(
        Address(
            __import__("pycardano").VerificationKeyHash(key_hash(bytes(payout_key.verify_key))),
            network=Network.TESTNET,
        )
    )
    nonce = worker.call("POST", "/api/v1/worker/challenge").json()["nonce"]
    binding = {
        "network": NETWORK,
        "worker_pubkey": worker.public_key,
        "payout_address": payout,
        "nonce": nonce,
        "signature": worker.key.sign(
            binding_message(NETWORK, worker.public_key, payout, nonce)
        ).signature.hex(),
    }
    gpu = {"index": 0, "uuid": uuid, "name": "NVIDIA H100", "memory_mb": 81920}
    capabilities = {
        "worker_version": "0.1.0",
        "cpu_only": False,
        "cpu_only_reason": None,
        "driver_version": "550.54",
        "cuda_version": "12.4",
        "gpus": [
            {
                "index": 0,
                "uuid": uuid,
                "compute_capability": "9.0",
                "pci_bus_id": "00000000:01:00.0",
                "memory_total_bytes": 81920 * 2**20,
            }
        ],
        "host": {
            "os": "Linux",
            "kernel": "6.1",
            "arch": "x86_64",
            "cpu_model": "test",
            "cpu_count": 8,
            "ram_total_bytes": 2**35,
            "disk_free_bytes": 2**40,
            "python": "3.11",
        },
        "runtime_check": {"status": "ok", "problem": "", "diagnosis": ""},
        "challenge_seed_source": "api-nonce",
        "challenges": [],
    }
    registered = worker.call(
        "POST",
        "/api/v1/worker/register",
        json.dumps({"binding": binding, "gpus": [gpu], "capabilities": capabilities}).encode(),
        **{"content-type": "application/json"},
    )
    assert registered.status_code == 200, registered.text
    return payout


@dataclass
class Stack:
    """The API app (serving the oracle feed) and the oracle app over a running devnet, a
    signed-in approved submitter."""

    http: httpx.Client
    auth: dict[str, str]
    devnet: RunningDevnet
    submitter: PaymentSigningKey
    policy: str
    oracle: Any  # the oracle app's TestClient

    def submit(self, spec_dict: dict[str, Any]) -> tuple[str, EscrowRef]:
        """Post the job, lock its escrow on the devnet and record it."""
        created = self.http.post("/api/v1/jobs", json={"spec": spec_dict}, headers=self.auth)
        assert created.status_code == 201, created.text
        job_id = str(created.json()["job_id"])
        escrow = lock_escrow(self.devnet, self.submitter, job_id, self.policy)
        recorded = self.http.post(
            f"/api/v1/jobs/{job_id}/escrow",
            json={"tx_id": escrow.tx_id, "index": escrow.index},
            headers=self.auth,
        )
        assert recorded.status_code == 200, recorded.text
        return job_id, escrow

    def attest(self, att: Attestation, key: SigningKey) -> dict[str, Any]:
        """Post the signed attestation to the oracle; its view after verification."""
        posted = self.oracle.post(
            "/api/v1/attestations",
            content=sign_attestation(Attestation.model_validate(att.model_dump()), key).cose,
            headers={"content-type": "application/cose"},
        ).json()
        return dict(self.oracle.get(f"/api/v1/attestations/{posted['id']}").json())


@contextmanager
def stack(devnet: RunningDevnet, tmp_path: Path, *, backend: str = "devnet") -> Iterator[Stack]:
    """The API and the oracle on `backend`: "devnet" (its Blockfrost REST) or "ogmios" (a
    self-hosted node: Ogmios and Kupo, the devnet node bridge in front of the devnet)."""
    with ExitStack() as stack_of:
        node = stack_of.enter_context(node_bridge(devnet.url)) if backend == "ogmios" else None
        yield stack_of.enter_context(_stack(devnet, tmp_path, node))


@contextmanager
def _stack(devnet: RunningDevnet, tmp_path: Path, node: NodeBridge | None) -> Iterator[Stack]:
    policy = devnet.admin_status()["faucet_policy_id"]
    oracle_key = write_key(tmp_path / "oracle.skey")
    api_db = f"sqlite:///{tmp_path / 'api.db'}"
    api_config = ApiConfig(
        database_url=api_db,
        network=NETWORK,
        rate_limit_per_minute=100_000,
        oracle_keys=(oracle_key.public_key_hex,),
        # The escrow lasts two hours: the job's one-hour run and this window fit in it.
        settlement_window_s=600,
    )
    # The protocol's script hashes as the hand-made escrow names them (only the escrow
    # script is deployed for real: it takes no parameters).
    deployed = deployment(ntx_policy=policy)
    deployment_file = tmp_path / "deployment.json"
    deployed.save(deployment_file)
    api_engine = make_api_engine(api_db)
    upgrade_head(api_engine)
    api_app = create_api(config=api_config, engine=api_engine, run_sweeper=False)
    api_app.state.chain_context = (
        devnet.chain_context()
        if node is None
        else NodeChainContext(node.ogmios_url, node.kupo_url, Network.TESTNET)
    )
    api_app.state.deployment = deployed
    api_app.state.blob_store = LocalBlobStore(tmp_path / "blobs")

    submitter = PaymentSigningKey.generate()
    submitter_address = str(
        Address(submitter.to_verification_key().hash(), network=Network.TESTNET)
    )
    with open_session(api_engine) as session:
        from datetime import UTC, datetime

        add_senior(session, api_config, submitter_address, datetime.now(UTC))

    with serve_app(api_app) as api_url, httpx.Client(base_url=api_url, timeout=30) as http:
        auth = sign_in(http, submitter, submitter_address)
        settings = Settings(
            network=NETWORK,
            chain_backend="devnet" if node is None else "ogmios",
            devnet_url=devnet.url,
            ogmios_url=node.ogmios_url if node is not None else "ws://127.0.0.1:1337",
            kupo_url=node.kupo_url if node is not None else "",
            api_url=api_url,
            ntx_policy_id=policy,
            ntx_asset_name=NTX_NAME.hex(),
            oracle_key_file=oracle_key.path,
            deployment_file=deployment_file,
            data_dir=tmp_path / "oracle-data",
        )
        metrics = OracleMetrics()
        oracle_app = create_oracle(
            settings,
            context=lambda store: context_from_settings(
                settings, store, metrics, spot_checks=False
            ),
            database_url=f"sqlite:///{tmp_path / 'oracle.db'}",
            metrics=metrics,
            inline=True,
        )
        from fastapi.testclient import TestClient

        with TestClient(oracle_app) as oracle:
            yield Stack(http, auth, devnet, submitter, policy, oracle)


def spec_of(results: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "model": {"repo_url": "https://example.org/train.git", "commit": "c" * 40},
        "framework": "numpy",
        "image": "python@sha256:" + "d" * 64,
        "commands": [["python", "train.py"]],
        "resources": {
            "gpus": 1,
            "gpu_memory_mb": 1024,
            "cpus": 1,
            "ram_mb": 1024,
            "disk_mb": 1024,
            "max_duration_s": 3600,
        },
        "results": results,
        "pricing": {"kind": "fixed", "amount": PRICE},
        "seed": secrets.randbelow(2**63),
    }


def attestation(
    worker: Signed,
    payout: str,
    job_id: str,
    escrow: EscrowRef,
    spec: JobSpec,
    *,
    nonce: str,
    started: int,
    ended: int,
    results: dict[str, str],
    pot_root: str,
    amount: int,
) -> Attestation:
    return Attestation(
        domain=AttestationDomain(
            network=NETWORK,
            escrow_script_hash=escrow_script_hash(),
            escrow=escrow,
            job_id=job_id,
        ),
        worker_key=worker.public_key,
        payout_address=payout,
        started_ms=started,
        ended_ms=ended,
        gpu_milliseconds=ended - started,
        gpu_model="NVIDIA H100",
        gpu_uuid_sha256=hashlib.sha256(b"GPU-1").hexdigest(),
        image_digest=spec.image_digest,
        command_hash=spec.command_hash,
        result_hashes=results,
        pot_root=pot_root,
        metrics={},
        nonce=nonce,
        amount=amount,
    )


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["devnet", "ogmios"])
def test_honest_attestation_verified_end_to_end(
    devnet: RunningDevnet, tmp_path: Path, backend: str
) -> None:
    """On "ogmios" the API records the escrow and the oracle verifies it through Kupo."""
    spec_dict = spec_of([{"path": "metrics.json", "kind": "json"}])
    spec = JobSpec.from_dict(spec_dict)
    with stack(devnet, tmp_path, backend=backend) as world:
        job_id, escrow = world.submit(spec_dict)
        assert job_id == spec.job_id
        worker = Signed(world.http, SigningKey.generate())
        payout = register(worker)
        claim = worker.call("POST", "/api/v1/worker/claim").json()
        started = int(time.time() * 1000)
        metrics_file = b'{"loss": "0.125"}\n'
        put = worker.call(
            "PUT",
            f"/api/v1/worker/leases/{claim['lease_token']}/results/metrics.json",
            metrics_file,
        )
        assert put.status_code == 200, put.text
        time.sleep(0.05)
        ended = int(time.time() * 1000)
        done = worker.call(
            "POST",
            f"/api/v1/worker/leases/{claim['lease_token']}/complete",
            b"{}",
            **{"content-type": "application/json"},
        )
        assert done.status_code == 200, done.text
        att = attestation(
            worker,
            payout,
            job_id,
            escrow,
            spec,
            nonce=claim["nonce"],
            started=started,
            ended=ended,
            results={"metrics.json": hashlib.sha256(metrics_file).hexdigest()},
            pot_root="0" * 64,
            amount=PRICE,
        )
        # The same work claimed for more than the price is rejected against the real feed;
        # the rejection does not block the honest attestation for the same escrow.
        bad = world.attest(att.model_copy(update={"amount": PRICE + 1}), worker.key)
        assert bad["status"] == "rejected" and bad["reason"] == "amount_exceeds_price"
        honest = world.attest(att, worker.key)
        assert honest["status"] == "verified", honest


def recorded_run(job_dir: Path, segments: int, *, resume_from: Path | None = None) -> Path:
    """A real pot run of 4 segments: `segments` of them recorded (a lost provider's prefix),
    or, with `resume_from`, resumed from that prefix's last checkpoint to the end."""
    from pot import harness
    from pot.examples.numpy_mlp import MLPTrainer
    from pot.harness import run_segment
    from pot.recorder import ProofOfTraining
    from pot.schedule import Schedule
    from pot.trainer import TrainContext

    schedule = Schedule(total_steps=40, steps_per_checkpoint=10, dataset_size=128, batch_size=16)
    ctx = TrainContext(job_dir, 7, 11, schedule, {"hidden": 8})
    pot_dir = job_dir / "pot"
    if resume_from is not None:
        harness.resume(MLPTrainer(ctx), ctx, pot_dir, resume_from, at=segments)
        return pot_dir
    trainer = MLPTrainer(ctx)
    recorder = ProofOfTraining(pot_dir, steps_per_checkpoint=10, data_seed=11)
    recorder.start(trainer.state())
    for segment in range(1, segments + 1):
        run_segment(
            trainer,
            schedule.sampler(11),
            schedule.segment_steps(segment),
            lambda _s, idx, loss: recorder.record_step(idx, loss),
        )
        recorder.commit(trainer.state())
    recorder.leaves  # noqa: B018 - waits for the writes
    return pot_dir


@pytest.mark.slow
def test_a_resumed_attempt_is_paid_its_share_end_to_end(
    devnet: RunningDevnet, tmp_path: Path
) -> None:
    """A real escrow on the devnet; provider A is lost after 2 of 4 segments (its prefix
    uploaded), provider B resumes from it and completes. The oracle, over the API's signed
    feed, verifies B's attestation for its share (segments 3..4: half the price), and
    refuses B claiming the whole price (A's segments are not B's to be paid for). (A proof
    that does not chain to A's prefix: tests/oracle/test_verify_resumed.py.)"""
    from pot.manifest import Manifest

    spec_dict = spec_of([{"path": "pot/**", "kind": "model"}])
    spec_dict["proof"] = {  # 4 segments, as `recorded_run` trains them
        "steps_per_checkpoint": 10,
        "schedule": {"steps": 40, "dataset_size": 128, "batch_size": 16},
    }
    spec = JobSpec.from_dict(spec_dict)
    with stack(devnet, tmp_path) as world:
        job_id, escrow = world.submit(spec_dict)
        first, second = (Signed(world.http, SigningKey.generate()) for _ in range(2))
        register(first, uuid="GPU-A")
        payout = register(second, uuid="GPU-B")

        def upload(worker: Signed, token: str, pot_dir: Path) -> dict[str, str]:
            digests = {}
            for path in sorted(pot_dir.iterdir()):
                data = path.read_bytes()
                put = worker.call(
                    "PUT", f"/api/v1/worker/leases/{token}/results/pot/{path.name}", data
                )
                assert put.status_code == 200, put.text
                digests[f"pot/{path.name}"] = hashlib.sha256(data).hexdigest()
            return digests

        lost = first.call("POST", "/api/v1/worker/claim").json()
        prefix_dir = recorded_run(tmp_path / "a", 2)
        upload(first, lost["lease_token"], prefix_dir)
        released = first.call(
            "POST",
            f"/api/v1/worker/leases/{lost['lease_token']}/release",
            json.dumps({"reason": "spot instance reclaimed"}).encode(),
            **{"content-type": "application/json"},
        )
        assert released.status_code == 200, released.text

        claim = second.call("POST", "/api/v1/worker/claim").json()
        assert claim["resume"]["at"] == 2 and claim["nonce"] == lost["nonce"]
        started = int(time.time() * 1000)
        pot_dir = recorded_run(tmp_path / "b", 2, resume_from=prefix_dir)
        upload(second, claim["lease_token"], pot_dir)
        ended = int(time.time() * 1000)
        done = second.call(
            "POST",
            f"/api/v1/worker/leases/{claim['lease_token']}/complete",
            b"{}",
            **{"content-type": "application/json"},
        )
        assert done.status_code == 200, done.text
        share = segment_cap(spec, PRICE, 3)
        assert share == PRICE // 2
        att = attestation(
            second,
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
        ).model_copy(update={"segments": SegmentClaim(attempt=claim["attempt"], first=3, last=4)})
        greedy = world.attest(att.model_copy(update={"amount": PRICE}), second.key)
        assert greedy["status"] == "rejected", greedy
        assert greedy["reason"] == "amount_exceeds_price"
        honest = world.attest(att, second.key)
        assert honest["status"] == "verified", honest


@pytest.mark.slow
def test_a_lost_attempt_is_paid_its_segments_beside_the_resumed_one_end_to_end(
    devnet: RunningDevnet, tmp_path: Path
) -> None:
    """Provider A is lost after 2 of 4 segments, having uploaded its prefix and the claim it
    signed at checkpoint 2 (`pot/claim-2.cose`, as `worker.checkpoint_upload` does); it
    never comes back. Provider B resumes, completes and sends its attestation naming its
    attempt and segments 3..4. Once B's is verified, the oracle takes A's claim from the
    API and verifies it: both are payable from the one escrow (keys `<escrow>@<attempt>`),
    each half the price, together never more than the price."""
    from pot.manifest import Manifest

    spec_dict = spec_of([{"path": "pot/**", "kind": "model"}])
    spec_dict["proof"] = {
        "steps_per_checkpoint": 10,
        "schedule": {"steps": 40, "dataset_size": 128, "batch_size": 16},
    }
    spec = JobSpec.from_dict(spec_dict)
    with stack(devnet, tmp_path) as world:
        job_id, escrow = world.submit(spec_dict)
        first, second = (Signed(world.http, SigningKey.generate()) for _ in range(2))
        lost_payout = register(first, uuid="GPU-A")
        payout = register(second, uuid="GPU-B")

        def put(worker: Signed, token: str, name: str, data: bytes) -> None:
            done = worker.call("PUT", f"/api/v1/worker/leases/{token}/results/{name}", data)
            assert done.status_code == 200, done.text

        lost = first.call("POST", "/api/v1/worker/claim").json()
        started = int(time.time() * 1000)
        prefix_dir = recorded_run(tmp_path / "a", 2)
        for path in sorted(prefix_dir.iterdir()):
            put(first, lost["lease_token"], f"pot/{path.name}", path.read_bytes())
        share = segment_cap(spec, PRICE, 1, 2)
        claim_of_a = attestation(
            first,
            lost_payout,
            job_id,
            escrow,
            spec,
            nonce=lost["nonce"],
            started=started,
            ended=int(time.time() * 1000),
            results={},
            pot_root=Manifest.load(prefix_dir, name="prefix.json").root,
            amount=share,
        ).model_copy(update={"segments": SegmentClaim(attempt=lost["attempt"], first=1, last=2)})
        signed_claim = sign_attestation(
            Attestation.model_validate(claim_of_a.model_dump()), first.key
        )
        put(first, lost["lease_token"], "pot/claim-2.cose", signed_claim.cose)
        released = first.call(
            "POST",
            f"/api/v1/worker/leases/{lost['lease_token']}/release",
            json.dumps({"reason": "machine gone"}).encode(),
            **{"content-type": "application/json"},
        )
        assert released.status_code == 200, released.text

        claim = second.call("POST", "/api/v1/worker/claim").json()
        assert claim["resume"]["at"] == 2
        started = int(time.time() * 1000)
        pot_dir = recorded_run(tmp_path / "b", 2, resume_from=prefix_dir)
        for path in sorted(pot_dir.iterdir()):
            put(second, claim["lease_token"], f"pot/{path.name}", path.read_bytes())
        ended = int(time.time() * 1000)
        done = second.call(
            "POST",
            f"/api/v1/worker/leases/{claim['lease_token']}/complete",
            b"{}",
            **{"content-type": "application/json"},
        )
        assert done.status_code == 200, done.text
        att = attestation(
            second,
            payout,
            job_id,
            escrow,
            spec,
            nonce=claim["nonce"],
            started=started,
            ended=ended,
            results={},
            pot_root=Manifest.load(pot_dir).root,
            amount=segment_cap(spec, PRICE, 3),
        )
        bare = world.attest(att, second.key)
        assert bare["status"] == "rejected" and bare["reason"] == "segments_mismatch", bare
        named = att.model_copy(
            update={"segments": SegmentClaim(attempt=claim["attempt"], first=3, last=4)}
        )
        honest = world.attest(named, second.key)
        assert honest["status"] == "verified", honest

        listed = world.oracle.get(f"/api/v1/jobs/{job_id}/attestations").json()
        rows = listed["data"]
        paid = {r["worker_key"]: r for r in rows if r["status"] == "verified"}
        assert set(paid) == {first.public_key, second.public_key}, rows
        assert paid[first.public_key]["amount"] == share == PRICE // 2
        assert sum(r["amount"] for r in paid.values()) <= PRICE
