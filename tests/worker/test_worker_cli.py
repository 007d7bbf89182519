import json
import os
import socket
import stat
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fake_nvml import FakeNvml
from nacl.signing import SigningKey, VerifyKey
from typer.testing import CliRunner

from proofnet.messages.address import enterprise_address
from proofnet.messages.binding import verify_payout_binding
from proofnet.messages.merkle import InclusionProof
from proofnet.messages.registration import ProviderRegistration
from proofnet.messages.worker_auth import request_message
from proofnet.settings import build_settings
from worker.challenge import RevealedRow, seed_from_nonce, verify_rows
from worker.cli import OnboardOptions, RunSetupError, app, data_policy_from_settings, run_onboarding

ADDRESS = enterprise_address(bytes(SigningKey(b"\x05" * 32).verify_key), "preprod")
runner = CliRunner()


@pytest.fixture(autouse=True)
def _cpu_only_machine(monkeypatch, tmp_path):
    # Deterministic on any machine: no NVML, no GPU frameworks, no stray .env or PROOFNET_*.
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.chdir(tmp_path)
    for name in ("PROOFNET_NETWORK", "PROOFNET_WORKER_KEY_FILE", "PROOFNET_WORKER_WORK_DIR"):
        monkeypatch.delenv(name, raising=False)


def _args(tmp_path, *extra):
    return [
        "onboard",
        "--work-dir",
        str(tmp_path / "work"),
        "--key-file",
        str(tmp_path / "keys" / "worker.skey"),
        "--network",
        "preprod",
        "--challenge-n",
        "64",
        *extra,
    ]


def _revealed(report):
    return [
        RevealedRow(
            index=r.index,
            values=tuple(r.values),
            proof=InclusionProof(
                index=r.proof.index,
                size=r.proof.size,
                path=tuple(bytes.fromhex(h) for h in r.proof.path),
            ),
        )
        for r in report.revealed
    ]


def test_cpu_only_onboarding_end_to_end(tmp_path):
    result = runner.invoke(app, _args(tmp_path, "--payout-address", ADDRESS, "--json"))
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["ok"] and out["key_created"] and not out["registered"]
    assert stat.S_IMODE((tmp_path / "keys" / "worker.skey").stat().st_mode) == 0o600

    reg = ProviderRegistration.model_validate_json(
        (tmp_path / "work" / "registration.json").read_text()
    )
    caps = reg.capabilities
    assert reg.gpus == [] and caps.cpu_only and "nvidia-ml-py" in caps.cpu_only_reason
    assert caps.runtime_check.status == "skipped"
    assert caps.challenge_seed_source == "local-nonce"
    assert caps.host.cpu_count >= 1

    binding = reg.binding
    assert binding.payout_address == ADDRESS and binding.key_id == out["key_id"]
    verify_payout_binding(binding, network="preprod", nonce=binding.nonce, payout_address=ADDRESS)

    (challenge,) = caps.challenges
    assert challenge.backend == "numpy" and challenge.gpu_uuid is None
    assert challenge.seed == seed_from_nonce(binding.nonce) and challenge.n == 64
    assert challenge.plausibility == "cpu" and "Freivalds rounds passed" in challenge.self_check
    assert len(challenge.revealed) == 2
    assert verify_rows(challenge.seed, 64, _revealed(challenge), challenge.commitment).ok

    again = runner.invoke(app, _args(tmp_path, "--payout-address", ADDRESS, "--json"))
    assert again.exit_code == 0 and not json.loads(again.output)["key_created"]


def test_human_summary_says_cpu_only(tmp_path):
    result = runner.invoke(app, _args(tmp_path, "--skip-challenge"))
    assert result.exit_code == 0, result.output
    assert "CPU-only worker" in result.output
    assert "no payout address" in result.output and "challenge: skipped" in result.output
    reg = ProviderRegistration.model_validate_json(
        (tmp_path / "work" / "registration.json").read_text()
    )
    assert reg.binding is None and reg.capabilities.challenges == []


def test_bad_payout_address_is_a_clear_error(tmp_path):
    mainnet = enterprise_address(bytes(SigningKey(b"\x05" * 32).verify_key), "mainnet")
    result = runner.invoke(app, _args(tmp_path, "--payout-address", mainnet))
    assert result.exit_code == 2
    assert "cannot bind the payout address" in result.output


def test_unknown_network_is_refused(tmp_path):
    args = _args(tmp_path)
    args[args.index("preprod")] = "testnet"
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "unknown network 'testnet'" in result.output


def test_api_without_payout_address_is_refused(tmp_path):
    result = runner.invoke(app, _args(tmp_path, "--api-url", "http://127.0.0.1:9"))
    assert result.exit_code == 2 and "--payout-address" in result.output


def test_unreachable_api_is_a_clear_error(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = runner.invoke(
        app,
        _args(tmp_path, "--payout-address", ADDRESS, "--api-url", f"http://127.0.0.1:{port}"),
    )
    assert result.exit_code == 2
    assert f"cannot reach the proofnet API at http://127.0.0.1:{port}" in result.output


class _StubApi(BaseHTTPRequestHandler):
    """The two worker endpoints, checking request signatures as the API does."""

    nonce = "7a" * 32
    received: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = self.headers["X-Proofnet-Worker-Key"]
        message = request_message(
            network="preprod",
            method="POST",
            path=self.path,
            timestamp=int(self.headers["X-Proofnet-Timestamp"]),
            nonce=self.headers["X-Proofnet-Nonce"],
            body=body,
        )
        VerifyKey(bytes.fromhex(key)).verify(
            message, bytes.fromhex(self.headers["X-Proofnet-Signature"])
        )
        if self.path == "/api/v1/worker/challenge":
            answer = {
                "nonce": self.nonce,
                "network": "preprod",
                "expires_at": "2030-01-01T00:00:00Z",
            }
        elif self.path == "/api/v1/worker/register":
            self.received.append((key, body))
            answer = {"key_id": "x", "worker_key": key, "payout_address": ADDRESS}
        else:
            self.send_error(404)
            return
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_registers_with_the_api_using_its_nonce(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StubApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        result = runner.invoke(
            app, _args(tmp_path, "--payout-address", ADDRESS, "--api-url", url, "--json")
        )
    finally:
        server.shutdown()
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["registered"] and out["api_response"]["payout_address"] == ADDRESS
    ((key, body),) = _StubApi.received
    reg = ProviderRegistration.model_validate_json(body)
    verify_payout_binding(reg.binding, network="preprod", nonce=_StubApi.nonce, worker_pubkey=key)
    assert reg.capabilities.challenge_seed_source == "api-nonce"
    assert reg.capabilities.challenges[0].seed == seed_from_nonce(_StubApi.nonce)


class _DockerWithoutNvidiaRuntime:
    class images:
        @staticmethod
        def get(name):
            return None

    class containers:
        @staticmethod
        def create(*args, **kwargs):
            import docker.errors

            raise docker.errors.APIError(
                "500", explanation='could not select device driver "" with capabilities: [[gpu]]'
            )

    def ping(self):
        return True


def test_gpu_machine_with_broken_container_runtime_is_not_ready(tmp_path):
    opts = OnboardOptions(
        api_url=None,
        payout_address=ADDRESS,
        key_file=tmp_path / "k",
        work_dir=tmp_path / "w",
        network="preprod",
        skip_challenge=True,
        skip_runtime_check=False,
        challenge_n=None,
        dtype="float32",
        gpu_image="img",
    )
    outcome = run_onboarding(
        opts, nvml=FakeNvml.from_recording(), docker_client=_DockerWithoutNvidiaRuntime()
    )
    assert not outcome.ok and not outcome.registered
    assert "Docker has no NVIDIA runtime" in outcome.problems[0]
    reg = outcome.registration
    assert [g.name for g in reg.gpus] == ["NVIDIA H200"] and reg.gpus[0].memory_mb == 143771
    assert reg.capabilities.runtime_check.problem == "no-nvidia-runtime"
    assert reg.capabilities.gpus[0].compute_capability == "9.0"


def test_gpu_claim_without_gpu_framework_is_reported(tmp_path):
    opts = OnboardOptions(
        api_url=None,
        payout_address=None,
        key_file=tmp_path / "k",
        work_dir=tmp_path / "w",
        network="preprod",
        skip_challenge=False,
        skip_runtime_check=True,
        challenge_n=64,
        dtype="float32",
        gpu_image="img",
    )
    outcome = run_onboarding(opts, nvml=FakeNvml.from_recording())
    assert any("ran on the CPU" in p for p in outcome.problems)
    (challenge,) = outcome.registration.capabilities.challenges
    assert challenge.backend == "numpy" and challenge.gpu_uuid.startswith("GPU-")


def test_the_providers_data_settings_become_its_fetch_policy(tmp_path: Path) -> None:
    settings = build_settings(
        worker_data_allow_http=True,
        worker_data_allow_networks="10.0.0.0/8, 192.168.1.5",
        worker_local_data_dirs=f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}",
        worker_data_max_mb=7,
        worker_data_timeout_s=9.0,
    )
    policy = data_policy_from_settings(settings, [])
    assert policy.allow_http and policy.max_mb == 7 and policy.timeout_s == 9.0
    assert policy.local_dirs == (tmp_path / "a", tmp_path / "b")
    assert policy.egress.refusal("10.1.2.3") is None
    assert policy.egress.refusal("192.168.1.6") is not None
    # The command line's directories win over the setting's.
    assert data_policy_from_settings(settings, [tmp_path / "c"]).local_dirs == (tmp_path / "c",)
    # Nothing allowed by default: https to public addresses only, no local files.
    default = data_policy_from_settings(build_settings(), [])
    assert not default.allow_http and default.local_dirs == () and default.egress.allow == ()
    with pytest.raises(RunSetupError, match="ALLOW_NETWORKS"):
        data_policy_from_settings(build_settings(worker_data_allow_networks="not-a-network"), [])
