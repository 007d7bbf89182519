"""`proofnet chain`: keygen, deploy and mint against a running devnet, as an operator would."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from chain.devnet.testing import RunningDevnet
from chain.offchain.builders import Deployment
from chain.offchain.cli import app


@pytest.fixture
def operator_env(devnet: RunningDevnet, monkeypatch: pytest.MonkeyPatch) -> RunningDevnet:
    monkeypatch.setenv("PROOFNET_CHAIN_BACKEND", "devnet")
    monkeypatch.setenv("PROOFNET_NETWORK", "devnet")
    monkeypatch.setenv("PROOFNET_DEVNET_URL", devnet.url)
    return devnet


def _keygen(runner: CliRunner, path: Path) -> tuple[str, str]:
    result = runner.invoke(app, ["keygen", str(path)])
    assert result.exit_code == 0, result.output
    key_hash = re.search(r"key hash: ([0-9a-f]{56})", result.output)
    address = re.search(r"address:\s+(addr_test1\w+)", result.output)
    assert key_hash and address, result.output
    assert path.stat().st_mode & 0o077 == 0  # never readable by others
    return key_hash.group(1), address.group(1)


def test_keygen_refuses_to_overwrite(tmp_path: Path) -> None:
    runner = CliRunner()
    path = tmp_path / "k.skey"
    _keygen(runner, path)
    before = path.read_text()
    result = runner.invoke(app, ["keygen", str(path)])
    assert result.exit_code == 2
    assert path.read_text() == before


def test_deploy_and_mint_through_the_cli(operator_env: RunningDevnet, tmp_path: Path) -> None:
    runner = CliRunner()
    admin_hash, admin_address = _keygen(runner, tmp_path / "admin.skey")
    oracle_hashes = [_keygen(runner, tmp_path / f"oracle{i}.skey")[0] for i in range(3)]
    operator_env.wait_for_tx(operator_env.fund(admin_address, lovelace=200_000_000))

    minted = runner.invoke(
        app,
        ["mint-test-ntx", "--key-file", str(tmp_path / "admin.skey"), "--to", admin_address,
         "--amount", "5000"],
    )  # fmt: skip
    assert minted.exit_code == 0, minted.output
    policy = re.search(r"minted 5000 of ([0-9a-f]{56})\.4e5458", minted.output)
    assert policy, minted.output
    operator_env.wait_for_tx(re.search(r"tx: ([0-9a-f]{64})", minted.output).group(1))  # type: ignore[union-attr]

    args = ["deploy", "--key-file", str(tmp_path / "admin.skey"), "--threshold", "2",
            "--admin", admin_hash, "--admin-threshold", "1", "--ntx-policy", policy.group(1),
            "--out", str(tmp_path / "deployment.json")]  # fmt: skip
    for key_hash in oracle_hashes:
        args += ["--oracle", key_hash]
    deployed = runner.invoke(app, args)
    assert deployed.exit_code == 0, deployed.output
    deployment = Deployment.load(tmp_path / "deployment.json")
    assert deployment.ntx_policy == policy.group(1) and deployment.ntx_name == "4e5458"
    # The batch script's stake credential is registered, and the config sits on chain.
    account = operator_env._client.get(
        f"{operator_env.url}/accounts/{deployment.batch_stake_address}"
    )
    assert account.status_code == 200 and account.json()["registered"] is True
    config_tx = deployment.config_ref.split("#")[0]
    assert operator_env._client.get(f"{operator_env.url}/txs/{config_tx}").status_code == 200


def test_deploy_refuses_a_bad_threshold(operator_env: RunningDevnet, tmp_path: Path) -> None:
    runner = CliRunner()
    admin_hash, admin_address = _keygen(runner, tmp_path / "admin.skey")
    operator_env.wait_for_tx(operator_env.fund(admin_address, lovelace=100_000_000))
    result = runner.invoke(
        app,
        ["deploy", "--key-file", str(tmp_path / "admin.skey"), "--oracle", admin_hash,
         "--threshold", "2", "--admin", admin_hash, "--admin-threshold", "1",
         "--ntx-policy", "00" * 28, "--out", str(tmp_path / "d.json")],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "threshold 2 not in 1..1" in result.output + str(result.stderr_bytes or b"")
    assert not (tmp_path / "d.json").exists()
