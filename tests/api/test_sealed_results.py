"""Sealed results end to end: the submitter registers a sealing key, the claim carries it,
the worker uploads ciphertexts, the API host cannot read them, the submitter's CLI opens them."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from api_support import NETWORK, Wallet, Worker, job_spec, release_results
from fastapi.testclient import TestClient
from nacl.public import PrivateKey

from api.client_cli import JobClient, JobCliError
from api.storage import LocalBlobStore
from proofnet.messages.envelope import (
    SealingError,
    new_secret,
    open_file,
    open_stream,
    seal_bytes,
)
from proofnet.messages.jobspec import ResultSpec
from proofnet.messages.sealing import generate_sealing_key, sealing_key_message
from proofnet.messages.worker_auth import request_target, sign_request_headers
from worker.api_client import BadClaim, parse_claim
from worker.results import collect_results, seal_results


def _put(worker: Worker, path: str, data: bytes) -> Any:
    now = worker.clock() if worker.clock else None
    signed = sign_request_headers(
        worker.key,
        network=NETWORK,
        method="PUT",
        path=request_target(path),
        body=data,
        timestamp=int(now.timestamp()) if now else None,
    )
    signed["content-type"] = "application/octet-stream"
    return worker.client.request("PUT", path, content=data, headers=signed)


def _cli(client: TestClient, wallet: Wallet, tmp_path: Path) -> JobClient:
    return JobClient(
        "http://testserver", wallet.signing_key, http=client, token_cache=tmp_path / "session"
    )


RESULTS = [
    {"path": "results/metrics.json", "kind": "json"},
    {"path": "out/*.bin", "kind": "model"},
]


def test_worker_seals_results_and_only_the_submitter_opens_them(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    wallet, _ = approved
    cli = _cli(client, wallet, tmp_path)
    sealing_key = generate_sealing_key(tmp_path / "sealing.key")
    registered = cli.register_sealing_key(sealing_key)
    assert registered["public_key"] == bytes(PrivateKey(sealing_key).public_key).hex()
    assert (tmp_path / "session").stat().st_mode & 0o777 == 0o600

    spec = job_spec(gpus=0)
    spec["results"] = RESULTS
    job_id = cli.submit(spec)["job_id"]

    worker = worker_factory()
    worker.register([])
    answer = worker.claim()
    assert answer.status_code == 200, answer.text
    claimed = parse_claim(answer.json())
    assert claimed.sealing is not None
    assert claimed.sealing.public_key == registered["public_key"]
    token = claimed.lease_token

    # The worker's side: collect, seal, upload the sealed files.
    job_dir = tmp_path / "job"
    (job_dir / "results").mkdir(parents=True)
    (job_dir / "out").mkdir()
    metrics = b'{"accuracy": "0.93"}\n'
    weights = b"SECRET-WEIGHTS" * 500
    (job_dir / "results" / "metrics.json").write_bytes(metrics)
    (job_dir / "out" / "model.bin").write_bytes(weights)
    collected = collect_results(job_dir, [ResultSpec.model_validate(r) for r in RESULTS])
    sealed = seal_results(
        collected,
        tmp_path / "sealed",
        secret=new_secret(),
        recipients=[claimed.sealing.public_key],
    )
    assert [s.name for s in sealed] == [c.name for c in collected]
    for s in sealed:
        up = _put(
            worker, f"/api/v1/worker/leases/{token}/results/{quote(s.name)}", s.path.read_bytes()
        )
        assert up.status_code == 200, up.text
        # What the API records (and the worker attests) is the ciphertext's hash.
        assert up.json()["sha256"] == s.sha256

    # The API host: the stored blobs are ciphertexts it cannot open.
    for s in sealed:
        blob = store.read_bytes(s.sha256)
        assert b"SECRET-WEIGHTS" not in blob and b"accuracy" not in blob
        with pytest.raises(SealingError, match="not sealed to this key"):
            open_stream(io.BytesIO(blob), io.BytesIO(), private_key=bytes(PrivateKey.generate()))

    # The submitter: not even the ciphertext before the oracles' verdict releases it.
    with pytest.raises(JobCliError, match="not released"):
        cli.results(job_id, tmp_path / "early", decrypt_with=sealing_key)
    release_results(client, job_id)
    # Then: downloads, checks the hashes, opens.
    out = tmp_path / "download"
    saved = cli.results(job_id, out, decrypt_with=sealing_key)
    assert {r.name: r.sha256 for r in saved} == {s.name: s.sha256 for s in sealed}
    assert all(r.sealed for r in saved)
    assert (out / "results" / "metrics.json").read_bytes() == metrics
    assert (out / "out" / "model.bin").read_bytes() == weights
    # Without the key the CLI says so instead of writing ciphertext as the result.
    with pytest.raises(JobCliError, match="decrypt-with"):
        cli.results(job_id, tmp_path / "nokey")


def test_sealed_blob_names_its_result_and_plaintext(tmp_path: Path) -> None:
    key = PrivateKey.generate()
    me = bytes(key.public_key).hex()
    blob = seal_bytes(b"data", name="a.bin", recipients=[me])
    src = tmp_path / "a.sealed"
    src.write_bytes(blob)
    opened = open_file(src, tmp_path / "a.bin", private_key=bytes(key), name="a.bin")
    assert opened.sha256 == hashlib.sha256(b"data").hexdigest()
    assert (tmp_path / "a.bin").read_bytes() == b"data"
    # A host that swaps sealed blobs between result names is caught, and nothing is written.
    with pytest.raises(SealingError, match="not 'b.bin'"):
        open_file(src, tmp_path / "b.bin", private_key=bytes(key), name="b.bin")
    assert not (tmp_path / "b.bin").exists()
    with pytest.raises(SealingError):
        src.write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))
        open_file(src, tmp_path / "c.bin", private_key=bytes(key))
    assert not (tmp_path / "c.bin").exists()
    with pytest.raises(SealingError, match="not a proofnet sealed"):
        open_stream(io.BytesIO(b"plain" * 10), io.BytesIO(), private_key=bytes(key))


def test_sealing_key_must_be_signed_by_the_account_wallet(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    tmp_path: Path,
) -> None:
    wallet, headers = approved
    public = bytes(PrivateKey.generate().public_key).hex()
    # Signed by another wallet: refused.
    other = Wallet().sign_data(sealing_key_message(public))
    refused = client.put("/api/v1/users/me/sealing-key", json=other, headers=headers)
    assert refused.status_code == 401, refused.text
    # Signed, but not a sealing-key statement: refused.
    wrong = wallet.sign_data("hello")
    assert (
        client.put("/api/v1/users/me/sealing-key", json=wrong, headers=headers).status_code == 400
    )
    assert client.get("/api/v1/users/me/sealing-key", headers=headers).status_code == 404

    good = wallet.sign_data(sealing_key_message(public))
    assert client.put("/api/v1/users/me/sealing-key", json=good, headers=headers).status_code == 200
    spec = job_spec(gpus=0)
    assert client.post("/api/v1/jobs", json={"spec": spec}, headers=headers).status_code == 201
    worker = worker_factory()
    worker.register([])
    body = worker.claim().json()
    assert body["sealing"]["public_key"] == public
    # A worker refuses a claim whose sealing key the wallet did not sign (an API host
    # swapping in its own key): it would rather not run the job than leak its results.
    forged = json.loads(json.dumps(body))
    forged["sealing"]["public_key"] = bytes(PrivateKey.generate().public_key).hex()
    with pytest.raises(BadClaim, match="sealing key"):
        parse_claim(forged)

    # Deleting the key: later claims carry no sealing.
    assert client.delete("/api/v1/users/me/sealing-key", headers=headers).status_code == 204
    assert (
        client.post(
            "/api/v1/jobs", json={"spec": job_spec(gpus=0, seed=7)}, headers=headers
        ).status_code
        == 201
    )
    assert worker_factory_claim_has_no_sealing(worker_factory)


def worker_factory_claim_has_no_sealing(worker_factory: Callable[[], Worker]) -> bool:
    worker = worker_factory()
    worker.register([])
    answer = worker.claim()
    assert answer.status_code == 200, answer.text
    return answer.json()["sealing"] is None
