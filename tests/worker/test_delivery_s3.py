"""A pre-signed PUT to a real S3 API: moto's S3 served over TLS on loopback (in-thread,
with a throwaway CA), a URL pre-signed by boto3, the worker's delivery, and the object read
back through the S3 API. The provider lets 127.0.0.1 back in as a provider would
(`PROOFNET_WORKER_DATA_ALLOW_NETWORKS`)."""

from __future__ import annotations

import hashlib
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto import settings as moto_settings
from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server

from proofnet.egress import EgressPolicy
from proofnet.messages.destinations import PresignedPut, S3PresignedDestination
from proofnet.messages.jobspec import ResultSpec
from tests.net_servers import names, tls_for
from worker.delivery import DeliveryPolicy, deliver
from worker.results import collect_results

HOST = "s3.example.test"
TLS = tls_for(HOST, "localhost")
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@pytest.fixture
def s3_port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name.upper(), value)
    # Path-style buckets whatever the host name (moto would read s3.example.test's first
    # label as a bucket).
    monkeypatch.setattr(moto_settings, "S3_IGNORE_SUBDOMAIN_BUCKETNAME", True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(TLS.cert_file, TLS.key_file)
    app = DomainDispatcherApplication(create_backend_app)
    server = make_server("127.0.0.1", 0, app, threaded=True, ssl_context=context)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()


def _s3(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        verify=str(TLS.ca_file),
        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"),
        **CREDENTIALS,
    )


def test_a_presigned_put_lands_in_a_real_s3_bucket_with_its_etag(
    tmp_path: Path, s3_port: int
) -> None:
    reader = _s3(f"https://localhost:{s3_port}")
    reader.create_bucket(Bucket="submitter")
    url = _s3(f"https://{HOST}:{s3_port}").generate_presigned_url(
        "put_object", Params={"Bucket": "submitter", "Key": "runs/model.pt"}, ExpiresIn=600
    )
    job = tmp_path / "job"
    job.mkdir()
    weights = b"\x00weights\xff" * 5000
    (job / "model.pt").write_bytes(weights)
    results = collect_results(job, [ResultSpec(path="model.pt", kind="model")])
    dest = S3PresignedDestination(puts=(PresignedPut(name="model.pt", url=url),))
    policy = DeliveryPolicy(
        egress=EgressPolicy.allowing(["127.0.0.1"]),
        resolver=names({HOST: ["127.0.0.1"]}),
        verify=TLS.ca_context(),
    )
    (report,) = deliver([dest], results, job_id="ab" * 32, sealed=False, policy=policy)
    assert report.acknowledged, report.reason
    (ack,) = report.results
    stored = reader.get_object(Bucket="submitter", Key="runs/model.pt")
    assert stored["Body"].read() == weights
    assert ack.etag == stored["ETag"] == '"' + hashlib.md5(weights).hexdigest() + '"'
