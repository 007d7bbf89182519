"""Drive a role's documented command sequence: `proofnet ...` as child processes in one
directory, with the relative paths the docs use, against a devnet started with
`proofnet devnet up` the way README.md shows (on a free port, data under the test's dir)."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from waiting import HANG_BOUND_S, until

from proofnet.processes import RoleGroup, RoleProcess, free_port, run_role_command


@dataclass
class Shell:
    """One operator's terminal: a working directory and the `PROOFNET_*` they exported."""

    cwd: Path
    env: dict[str, str]
    group: RoleGroup = field(default_factory=RoleGroup)

    @property
    def log(self) -> Path:
        return self.cwd / "commands.log"

    def enter(self, name: str, **env: str) -> Shell:
        """Another operator's terminal: a folder of its own (so each role's default paths,
        its database among them, are its own), the same exports plus `env`."""
        return Shell(self.cwd / name, {**self.env, **env}, self.group)

    def run(self, line: str, **extra_env: str) -> str:
        """Run one documented line (`proofnet` left out) to its end; its stdout."""
        argv = shlex.split(line)
        return run_role_command(
            argv[0], argv, self.log, env={**self.env, **extra_env}, cwd=self.cwd
        )

    def serve(self, name: str, line: str, health: str, **extra_env: str) -> RoleProcess:
        role = self.group.start(
            RoleProcess(
                name,
                shlex.split(line),
                self.cwd / f"{name}.log",
                env={**self.env, **extra_env},
                cwd=self.cwd,
            )
        )
        role.wait_healthy(health, timeout=HANG_BOUND_S)
        return role


def wait_for(what: str, probe: Callable[[], bool], group: RoleGroup) -> None:
    """Poll `probe` until it holds (an event: a block, a health answer); a role that died
    meanwhile fails at once. Only a hang bound (waiting.HANG_BOUND_S) ends it otherwise."""
    until(what, probe, alive=group.check_running, interval_s=0.2)


def lovelace_at(devnet_url: str, address: str) -> int:
    response = httpx.get(f"{devnet_url}/addresses/{address}", timeout=5)
    if response.status_code == 404:
        return 0
    response.raise_for_status()
    amounts = {a["unit"]: int(a["quantity"]) for a in response.json()["amount"]}
    return amounts.get("lovelace", 0)


def field_of(output: str, label: str) -> str:
    """The value printed after `label:` on one line of a command's output."""
    for line in output.splitlines():
        if line.strip().startswith(f"{label}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {label!r} line in:\n{output}")


@contextmanager
def devnet_shell(root: Path) -> Iterator[tuple[Shell, str]]:
    """`proofnet devnet up --data-dir devnet --port P` in `root`; a shell whose environment
    names that devnet as README's "Chain backends" table says (and keeps every default path
    of the roles under `root`, not the user's home)."""
    port = free_port()
    devnet_url = f"http://127.0.0.1:{port}/api/v0"
    shell = Shell(
        root,
        {
            "PROOFNET_CHAIN_BACKEND": "devnet",
            "PROOFNET_NETWORK": "devnet",
            "PROOFNET_DEVNET_URL": devnet_url,
            "PROOFNET_DATA_DIR": str(root / "data"),
            "PROOFNET_CACHE_DIR": str(root / "cache"),
            "PYTHONUNBUFFERED": "1",
            # An activated .venv, as after `make install`: job code (the worker's, the
            # oracle's replays) runs the `python3` that has numpy and the pot library.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        },
    )
    with shell.group:
        shell.serve("devnet", f"devnet up --data-dir devnet --port {port}", f"{devnet_url}/health")
        yield shell, devnet_url


@dataclass
class Network:
    """What the operators' commands printed and wrote: enough for the other roles."""

    root: Shell
    devnet_url: str
    api_url: str
    oracle_url: str
    admin_address: str
    admin_hash: str
    oracle_hash: str
    oracle_public_key: str
    ntx_policy: str
    ntx_name: str
    deployment_file: Path

    def ntx_at(self, address: str) -> int:
        response = httpx.get(f"{self.devnet_url}/addresses/{address}", timeout=5)
        if response.status_code == 404:
            return 0
        response.raise_for_status()
        unit = self.ntx_policy + self.ntx_name
        return sum(int(a["quantity"]) for a in response.json()["amount"] if a["unit"] == unit)


def in_block(devnet_url: str, tx_id: str) -> Callable[[], bool]:
    return lambda: httpx.get(f"{devnet_url}/txs/{tx_id}", timeout=5).status_code == 200


def stand_up_network(
    root: Shell, devnet_url: str, oracle_env: dict[str, str] | None = None, **api_env: str
) -> Network:
    """docs/operations.md "Deploying the contracts ... and funding the oracle" with one
    oracle (threshold 1) on the devnet, then the oracle and the API served with the settings
    that section names. The operator works in `operator/` with the docs' relative paths
    (`keys/...`, `deployment.json`); the API runs in `api/`."""
    op = root.enter("operator")
    admin = op.run("chain keygen keys/admin.skey")
    admin_hash, admin_address = field_of(admin, "key hash"), field_of(admin, "address")
    oracle = op.run("oracle keygen keys/oracle1.skey")
    oracle_hash, oracle_address = field_of(oracle, "key hash"), field_of(oracle, "address")
    # "fund the admin address with ~60 tADA"; "each oracle needs a little ADA at its key's
    # address (a single 5 ADA UTxO for collateral plus fees)": the devnet's faucet stands in
    # for the preprod faucet.
    op.run(f"devnet fund {admin_address} --ada 100")
    op.run(f"devnet fund {oracle_address} --ada 20")
    op.run(f"devnet fund {oracle_address} --ada 20")
    wait_for(
        "the faucet's payments in a block",
        lambda: (
            lovelace_at(devnet_url, admin_address) > 0
            and lovelace_at(devnet_url, oracle_address) >= 40_000_000
        ),
        root.group,
    )
    # "Without the NuNet preprod token, mint a test NTX under your own policy ... and pass
    # its policy to deploy."
    minted = op.run(
        f"chain mint-test-ntx --key-file keys/admin.skey --to {admin_address} --amount 1000000"
    )
    policy, name = minted.split(" of ", 1)[1].split()[0].split(".")
    wait_for("the mint in a block", in_block(devnet_url, field_of(minted, "tx")), root.group)
    deployed = op.run(
        f"chain deploy --key-file keys/admin.skey --oracle {oracle_hash} --threshold 1"
        f" --admin {admin_hash} --admin-threshold 1 --ntx-policy {policy} --ntx-name {name}"
        " --out deployment.json"
    )
    # Relative paths are made absolute against the directory the command started in.
    assert f"deployment written to {op.cwd / 'deployment.json'}" in deployed, deployed
    api_url = f"http://127.0.0.1:{free_port()}"
    oracle_url = f"http://127.0.0.1:{free_port()}"
    # "Run each oracle with its own key: proofnet oracle serve --key-file keys/oracleN.skey,
    # settlement enabled on the proposer": one oracle, threshold 1, no co-signers.
    op.serve(
        "oracle",
        f"oracle serve --key-file keys/oracle1.skey --port {oracle_url.rsplit(':', 1)[1]}",
        f"{oracle_url}/api/v1/health",
        PROOFNET_API_URL=api_url,
        PROOFNET_SETTLEMENT_ENABLED="1",
        PROOFNET_SETTLEMENT_DEPLOYMENT_FILE="deployment.json",
        PROOFNET_SETTLEMENT_COSIGNERS="[]",
        PROOFNET_SETTLEMENT_THRESHOLD="1",
        PROOFNET_NTX_POLICY_ID=policy,
        PROOFNET_NTX_ASSET_NAME=name,
        **(oracle_env or {}),
    )
    deployment_file = op.cwd / "deployment.json"
    api = root.enter(
        "api",
        PROOFNET_DEPLOYMENT_FILE=str(deployment_file),
        PROOFNET_API_ORACLE_KEYS=field_of(oracle, "public key"),
        PROOFNET_ORACLE_URL=oracle_url,
        PROOFNET_API_CHAIN_WATCH_INTERVAL_S="1",
        **api_env,
    )
    api.serve(
        "api",
        f"api serve --port {api_url.rsplit(':', 1)[1]}",
        f"{api_url}/api/v1/health",
    )
    return Network(
        root=root,
        devnet_url=devnet_url,
        api_url=api_url,
        oracle_url=oracle_url,
        admin_address=admin_address,
        admin_hash=admin_hash,
        oracle_hash=oracle_hash,
        oracle_public_key=field_of(oracle, "public key"),
        ntx_policy=policy,
        ntx_name=name,
        deployment_file=deployment_file,
    )
