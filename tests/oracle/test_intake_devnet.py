"""End to end on a running devnet: a real escrow locked at the escrow script, the real API
app (SQLite) serving the oracle feed, the real oracle app verifying over HTTP."""

from __future__ import annotations

import secrets
import time
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
from chain.devnet.testing import RunningDevnet, serve_app
from oracle.app import create_app as create_oracle
from oracle.keys import write_key
from oracle.metrics import OracleMetrics
from oracle.service import context_from_settings, escrow_script_hash
from proofnet.messages.address import key_hash
from proofnet.messages.attestation import (
    Attestation,
    AttestationDomain,
    EscrowRef,
    sign_attestation,
)
from proofnet.messages.binding import binding_message
from proofnet.messages.jobspec import JobSpec
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


@pytest.mark.slow
def test_honest_attestation_verified_end_to_end(devnet: RunningDevnet, tmp_path: Path) -> None:
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
    api_app.state.chain_context = devnet.chain_context()
    api_app.state.deployment = deployed
    api_app.state.blob_store = LocalBlobStore(tmp_path / "blobs")

    submitter = PaymentSigningKey.generate()
    submitter_address = str(
        Address(submitter.to_verification_key().hash(), network=Network.TESTNET)
    )
    with open_session(api_engine) as session:
        from datetime import UTC, datetime

        add_senior(session, api_config, submitter_address, datetime.now(UTC))

    spec_dict: dict[str, Any] = {
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
        "results": [{"path": "metrics.json", "kind": "json"}],
        "pricing": {"kind": "fixed", "amount": PRICE},
        "seed": secrets.randbelow(2**63),
    }
    spec = JobSpec.from_dict(spec_dict)

    with serve_app(api_app) as api_url, httpx.Client(base_url=api_url, timeout=30) as http:
        auth = sign_in(http, submitter, submitter_address)
        created = http.post("/api/v1/jobs", json={"spec": spec_dict}, headers=auth)
        assert created.status_code == 201, created.text
        job_id = created.json()["job_id"]
        assert job_id == spec.job_id

        escrow = lock_escrow(devnet, submitter, job_id, policy)
        recorded = http.post(
            f"/api/v1/jobs/{job_id}/escrow",
            json={"tx_id": escrow.tx_id, "index": escrow.index},
            headers=auth,
        )
        assert recorded.status_code == 200, recorded.text

        worker = Signed(http, SigningKey.generate())
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
        gpu = {"index": 0, "uuid": "GPU-1", "name": "NVIDIA H100", "memory_mb": 81920}
        capabilities = {
            "worker_version": "0.1.0",
            "cpu_only": False,
            "cpu_only_reason": None,
            "driver_version": "550.54",
            "cuda_version": "12.4",
            "gpus": [
                {
                    "index": 0,
                    "uuid": "GPU-1",
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
        import json

        registered = worker.call(
            "POST",
            "/api/v1/worker/register",
            json.dumps({"binding": binding, "gpus": [gpu], "capabilities": capabilities}).encode(),
            **{"content-type": "application/json"},
        )
        assert registered.status_code == 200, registered.text
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

        import hashlib

        att = Attestation(
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
            result_hashes={"metrics.json": hashlib.sha256(metrics_file).hexdigest()},
            pot_root="0" * 64,
            metrics={"loss": "0.125"},
            nonce=claim["nonce"],
            amount=PRICE,
        )
        settings = Settings(
            network=NETWORK,
            chain_backend="devnet",
            devnet_url=devnet.url,
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
            # The same work claimed for more than the price is rejected against the real feed;
            # the rejection does not block the honest attestation for the same escrow.
            inflated = att.model_copy(update={"amount": PRICE + 1})
            bad = oracle.post(
                "/api/v1/attestations",
                content=sign_attestation(
                    Attestation.model_validate(inflated.model_dump()), worker.key
                ).cose,
                headers={"content-type": "application/cose"},
            ).json()
            view = oracle.get(f"/api/v1/attestations/{bad['id']}").json()
            assert view["status"] == "rejected" and view["reason"] == "amount_exceeds_price"

            honest = sign_attestation(att, worker.key).cose
            body = oracle.post(
                "/api/v1/attestations", content=honest, headers={"content-type": "application/cose"}
            ).json()
            assert body["status"] == "verified", oracle.get(
                f"/api/v1/attestations/{body['id']}"
            ).json()
