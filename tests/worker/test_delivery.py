"""Results delivered where the submitter says: real local HTTPS servers play the webhook and
the pre-signed S3 URL. The provider lets 127.0.0.1 back in the way a provider would
(`PROOFNET_WORKER_DATA_ALLOW_NETWORKS`, parsed by `EgressPolicy.allowing`); every attack runs
with the public-only policy every provider has by default, and must be refused unfetched."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from proofnet.egress import EgressPolicy
from proofnet.messages.destinations import (
    WEBHOOK_MAX_BYTES,
    ApiDestination,
    Destination,
    PresignedPut,
    S3PresignedDestination,
    WebhookDestination,
)
from proofnet.messages.jobspec import ResultSpec
from tests.net_servers import Redirect, Status, Stored, names, serve, tls_for
from worker.delivery import SEALED_TYPE, DeliveryPolicy, deliver
from worker.results import CollectedResult, collect_results, seal_results

JOB = "ab" * 32
HOST = "hooks.example.test"
ALLOW_LOCAL = EgressPolicy.allowing(["127.0.0.1"])  # PROOFNET_WORKER_DATA_ALLOW_NETWORKS=127.0.0.1
PUBLIC_ONLY = EgressPolicy()
TLS = tls_for(HOST)


def _results(tmp_path: Path, metrics: bytes = b'{"loss": "0.25"}\n') -> list[CollectedResult]:
    job = tmp_path / "job"
    (job / "out").mkdir(parents=True, exist_ok=True)
    (job / "out" / "metrics.json").write_bytes(metrics)
    (job / "out" / "table.csv").write_bytes(b"step,loss\n1,0.5\n2,0.25\n")
    (job / "model.pt").write_bytes(b"\x00weights" * 100)
    specs = [
        ResultSpec(path="out/*.json", kind="json"),
        ResultSpec(path="out/*.csv", kind="csv"),
        ResultSpec(path="model.pt", kind="model"),
    ]
    return collect_results(job, specs)


def _policy(
    egress: EgressPolicy, resolver_map: dict[str, list[str]] | None = None
) -> DeliveryPolicy:
    return DeliveryPolicy(
        egress=egress,
        resolver=names(resolver_map or {HOST: ["127.0.0.1"]}),
        verify=TLS.ca_context(),
    )


def test_a_webhook_receives_each_json_and_csv_result_inline(tmp_path: Path) -> None:
    results = _results(tmp_path)
    with serve({"/hook": Status(204)}, tls=TLS) as server:
        dest = WebhookDestination(url=server.url(HOST, "/hook"))
        (report,) = deliver([dest], results, job_id=JOB, sealed=False, policy=_policy(ALLOW_LOCAL))
    assert report.acknowledged, report.reason
    assert [(a.name, a.status) for a in report.results] == [
        ("out/metrics.json", 204),
        ("out/table.csv", 204),
    ]
    sent = {s.headers["X-Proofnet-Result"]: s for s in server.seen}
    assert set(sent) == {"out/metrics.json", "out/table.csv"}  # the model is not inline
    assert sent["out/metrics.json"].body == b'{"loss": "0.25"}\n'
    assert sent["out/metrics.json"].headers["Content-Type"] == "application/json"
    assert sent["out/table.csv"].headers["Content-Type"] == "text/csv"
    assert {s.headers["X-Proofnet-Job-Id"] for s in server.seen} == {JOB}


def test_a_webhook_at_a_loopback_address_is_refused_not_fetched(tmp_path: Path) -> None:
    with serve({"/hook": Status(204)}, tls=TLS) as server:
        dest = WebhookDestination(url=server.url(HOST, "/hook"))
        (report,) = deliver(
            [dest], _results(tmp_path), job_id=JOB, sealed=False, policy=_policy(PUBLIC_ONLY)
        )
    assert not report.acknowledged
    assert "refused, not fetched" in report.reason and "loopback" in report.reason
    assert server.seen == [] and server.handshakes == []


def test_a_webhook_at_a_private_literal_address_is_refused(tmp_path: Path) -> None:
    dests = [
        WebhookDestination(url="https://10.0.0.5/hook"),
        WebhookDestination(url="https://169.254.169.254/latest/meta-data/"),
        WebhookDestination(url="https://[::ffff:127.0.0.1]:9/hook"),
    ]
    reports = deliver(
        dests, _results(tmp_path), job_id=JOB, sealed=False, policy=_policy(PUBLIC_ONLY)
    )
    assert [r.acknowledged for r in reports] == [False, False, False]
    assert "private" in reports[0].reason
    assert "metadata" in reports[1].reason
    assert "loopback" in reports[2].reason


def test_a_redirect_into_a_private_range_is_not_followed(tmp_path: Path) -> None:
    with serve({"/hook": Redirect("https://internal.example.test/steal")}, tls=TLS) as server:
        dest = WebhookDestination(url=server.url(HOST, "/hook"))
        resolver = {HOST: ["127.0.0.1"], "internal.example.test": ["10.0.0.5"]}
        (report,) = deliver(
            [dest],
            _results(tmp_path),
            job_id=JOB,
            sealed=False,
            policy=_policy(ALLOW_LOCAL, resolver),
        )
    assert not report.acknowledged and "answered 302" in report.reason
    assert [s.path for s in server.seen] == ["/hook"]  # one request; the hop never made


def test_a_result_over_the_inline_cap_is_refused_for_a_webhook(tmp_path: Path) -> None:
    big = b'{"x": "' + b"a" * WEBHOOK_MAX_BYTES + b'"}'
    with serve({"/hook": Status(204)}, tls=TLS) as server:
        dest = WebhookDestination(url=server.url(HOST, "/hook"))
        (report,) = deliver(
            [dest], _results(tmp_path, big), job_id=JOB, sealed=False, policy=_policy(ALLOW_LOCAL)
        )
    assert not report.acknowledged
    assert f"inline cap of {WEBHOOK_MAX_BYTES} bytes" in report.reason
    assert "out/metrics.json" in report.reason
    assert server.seen == []  # refused before anything was sent


def test_a_webhook_that_answers_an_error_is_not_an_acknowledgement(tmp_path: Path) -> None:
    with serve({"/hook": Status(500)}, tls=TLS) as server:
        dest = WebhookDestination(url=server.url(HOST, "/hook"))
        (report,) = deliver(
            [dest], _results(tmp_path), job_id=JOB, sealed=False, policy=_policy(ALLOW_LOCAL)
        )
    assert not report.acknowledged and "answered 500" in report.reason


def test_a_presigned_put_is_acknowledged_by_2xx_and_its_etag(tmp_path: Path) -> None:
    results = _results(tmp_path)
    with serve({"/bucket/model.pt": Stored('"etag-1"')}, tls=TLS) as server:
        url = server.url(HOST, "/bucket/model.pt?X-Amz-Signature=ab")
        dest = S3PresignedDestination(puts=(PresignedPut(name="model.pt", url=url),))
        (report,) = deliver([dest], results, job_id=JOB, sealed=False, policy=_policy(ALLOW_LOCAL))
    assert report.acknowledged, report.reason
    (ack,) = report.results
    assert (ack.name, ack.status, ack.etag) == ("model.pt", 200, '"etag-1"')
    (put,) = server.seen
    assert put.method == "PUT" and put.body == (tmp_path / "job" / "model.pt").read_bytes()
    assert put.headers["Content-Length"] == str(len(put.body))  # never chunked
    assert "Transfer-Encoding" not in put.headers


def test_a_put_answered_without_an_etag_is_not_acknowledged(tmp_path: Path) -> None:
    with serve({"/bucket/m": Stored(None)}, tls=TLS) as server:
        put = PresignedPut(name="out/metrics.json", url=server.url(HOST, "/bucket/m"))
        (report,) = deliver(
            [S3PresignedDestination(puts=(put,))],
            _results(tmp_path),
            job_id=JOB,
            sealed=False,
            policy=_policy(ALLOW_LOCAL),
        )
    assert not report.acknowledged and "no ETag" in report.reason


def test_a_sealed_job_delivers_the_sealed_envelopes_everywhere(tmp_path: Path) -> None:
    key = X25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    plain = _results(tmp_path)
    sealed = seal_results(plain, tmp_path / "sealed", secret=b"s" * 32, recipients=[key.hex()])
    routes = {"/hook": Status(200), "/bucket/model.pt": Stored()}
    with serve(routes, tls=TLS) as server:  # type: ignore[arg-type]
        dests: list[Destination] = [
            ApiDestination(),
            WebhookDestination(url=server.url(HOST, "/hook")),
            S3PresignedDestination(
                puts=(PresignedPut(name="model.pt", url=server.url(HOST, "/bucket/model.pt")),)
            ),
        ]
        reports = deliver(dests, sealed, job_id=JOB, sealed=True, policy=_policy(ALLOW_LOCAL))
    assert [r.acknowledged for r in reports] == [True, True, True]
    bodies = {s.headers.get("X-Proofnet-Result", s.path): s for s in server.seen}
    for r in sealed:
        body = bodies["/bucket/model.pt" if r.name == "model.pt" else r.name].body
        assert body == r.path.read_bytes()  # the envelope the API store got, not plaintext
        assert b"step,loss" not in body and b"weights" not in body
    assert bodies["out/metrics.json"].headers["Content-Type"] == SEALED_TYPE
    assert bodies["out/metrics.json"].headers["X-Proofnet-Sealed"] == "1"
