"""`proofnet storage serve|onboard|status` as a provider runs them: a real S3 server in its
own process, a real API over HTTP, the commands as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pycardano import Address, Network, PaymentSigningKey

from tests.worker.api_process import api_process

PROOFNET = [sys.executable, "-m", "proofnet.cli"]
REPO = Path(__file__).resolve().parents[2]


def _address() -> str:
    vk = PaymentSigningKey.generate().to_verification_key()
    return str(Address(vk.hash(), network=Network.TESTNET))


def _env(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PROOFNET_WORKER_KEY_FILE": str(tmp / "provider.skey"),
        "PROOFNET_NETWORK": "devnet",
    }


def _run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PROOFNET, "storage", *args], env=_env(tmp), capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def s3_endpoint(tmp_path: Path) -> Iterator[str]:
    """`proofnet storage serve` on a free port; its endpoint once the ready line is out."""
    process = subprocess.Popen(
        [*PROOFNET, "storage", "serve", "--port", "0", "--bucket", "proofnet-store"],
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("storage: serving S3 at "):
                yield line.split()[4]
                break
        else:
            raise AssertionError(f"storage serve exited with {process.wait()} before ready")
    finally:
        process.terminate()
        process.wait(20)


def test_serve_onboard_and_status_end_to_end(tmp_path: Path, s3_endpoint: str) -> None:
    import boto3

    # A real S3 server: boto3 sees the bucket serve created.
    s3 = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    assert "proofnet-store" in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    with api_process(tmp_path / "api", lease_ttl_s=30) as (api_url, _db, _proc):
        payout = _address()
        done = _run(
            tmp_path, "onboard", "--api-url", api_url, "--endpoint", s3_endpoint,
            "--capacity-gb", "5", "--price", "1500", "--payout-address", payout, "--json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        record = json.loads(done.stdout)
        assert (record["ntx_per_gb_month"], record["capacity_bytes"]) == (1500, 5 * 10**9)
        assert record["payout_address"] == payout
        # The probe object and its sidecar are on the endpoint: the oracle's path was tried.
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="proofnet-store")["Contents"]]
        assert "proofnet-probe/onboard" in keys
        shown = _run(tmp_path, "status", "--api-url", api_url)
        assert shown.returncode == 0, shown.stderr
        assert "0 of 5000000000 bytes held at 1500 NTX per GB-month" in shown.stdout
        assert "pending settlement: 0 NTX base units" in shown.stdout
        listed = _run(tmp_path, "offers", "--api-url", api_url)
        assert listed.returncode == 0, listed.stderr
        assert "1500 NTX per GB-month  5000000000 of 5000000000 bytes free" in listed.stdout
        cheaper = _run(tmp_path, "offers", "--api-url", api_url, "--max-price", "1000")
        assert cheaper.stdout.strip() == "no storage offers"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--price", "0"], "--price must be at least 1"),
        (["--price", "abc"], "Invalid value for '--price'"),
        (["--capacity-gb", "0"], "--capacity-gb must be at least 1"),
        (["--endpoint", "ftp://x"], "endpoint must be http(s)://host[:port]"),
    ],
)
def test_bad_onboard_input_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], words: str
) -> None:
    base = {
        "--endpoint": "http://127.0.0.1:1",
        "--capacity-gb": "5",
        "--price": "10",
        "--payout-address": _address(),
    }
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    done = _run(tmp_path, "onboard", *[x for kv in base.items() for x in kv])
    assert done.returncode == 2
    assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_an_endpoint_that_does_not_serve_is_refused_before_any_offer(tmp_path: Path) -> None:
    from proofnet.processes import free_port

    done = _run(
        tmp_path, "onboard", "--endpoint", f"http://127.0.0.1:{free_port()}",
        "--capacity-gb", "1", "--price", "10", "--payout-address", _address(),
        "--api-url", "http://127.0.0.1:9",
    )  # fmt: skip
    assert done.returncode == 2
    assert "the endpoint failed the probe" in done.stderr
