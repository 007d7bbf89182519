"""A submitter's path as the docs tell it, from a new wallet to money back: a key file
(`proofnet chain keygen payment.skey`), funded ADA and test NTX; "Becoming a submitter"
(docs/operations.md): the API's operator names a senior (`proofnet api add-senior`), the new
wallet applies (`proofnet approvals apply`), the senior lists and endorses (`proofnet approvals
list`, `endorse ID`), the applicant sees itself approved (`proofnet approvals status`); then
docs/escrow.md: `proofnet job submit job.json --key-file payment.skey --lock`, `proofnet job
escrow JOB_ID`, and `proofnet job cancel JOB_ID`, which returns the whole escrow at once through
the oracle-co-signed cancel while no provider has leased the job. Everything runs as the
documented command lines in child processes, against a devnet, oracle and API stood up by the
operators' documented commands (role_support.stand_up_network). The API counts one
endorsement (`PROOFNET_APPROVAL_ENDORSEMENTS=1`): the network has one senior."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from role_loop import PaidLoop
from role_support import (
    Network,
    Shell,
    devnet_shell,
    field_of,
    in_block,
    lovelace_at,
    stand_up_network,
    wait_for,
)

from demos import job as demo_job
from proofnet.processes import ProcessStartError

pytestmark = pytest.mark.slow

NTX = 5_000_000


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    with devnet_shell(tmp_path_factory.mktemp("submitter")) as (shell, devnet_url):
        yield stand_up_network(shell, devnet_url, PROOFNET_APPROVAL_ENDORSEMENTS="1")


def _new_wallet(network: Network, shell: Shell, name: str, ntx: int = 0) -> str:
    """`proofnet chain keygen NAME.skey`, ADA from the faucet, test NTX from the admin."""
    address = field_of(shell.run(f"chain keygen {name}.skey"), "address")
    shell.run(f"devnet fund {address} --ada 50")
    if ntx:
        operator = network.root.enter("operator")
        minted = operator.run(
            f"chain mint-test-ntx --key-file keys/admin.skey --to {address} --amount {ntx}"
            f" --name {network.ntx_name}"
        )
        wait_for(
            "the NTX in a block",
            in_block(network.devnet_url, field_of(minted, "tx")),
            network.root.group,
        )
    wait_for(
        "the faucet's ADA",
        lambda: network.ntx_at(address) >= ntx and _has_ada(network, address),
        network.root.group,
    )
    return address


def _has_ada(network: Network, address: str) -> bool:
    return lovelace_at(network.devnet_url, address) > 0


def test_from_a_new_wallet_to_money_back(network: Network) -> None:
    api = network.api_url
    senior_shell = network.root.enter("senior")
    senior = _new_wallet(network, senior_shell, "senior")
    network.root.enter("api").run(f"api add-senior {senior}")

    me = network.root.enter("submitter", PROOFNET_API_URL=api)
    address = _new_wallet(network, me, "payment", ntx=NTX)
    applied = me.run(
        f"approvals apply --key-file payment.skey --api-url {api} --statement 'training MLPs'"
    )
    assert "0 of 1 endorsements" in applied, applied
    number = applied.split("#", 1)[1].split()[0]

    listed = json.loads(
        senior_shell.run(f"approvals list --key-file senior.skey --api-url {api} --json")
    )
    assert [str(a["id"]) for a in listed["data"]] == [number], listed
    endorsed = senior_shell.run(
        f"approvals endorse {number} --key-file senior.skey --api-url {api}"
    )
    assert "approved" in endorsed, endorsed
    status = me.run("approvals status --key-file payment.skey")
    assert f"approved (1 of 1 endorsements, by {senior})" in status, status

    repo = demo_job.create_repo(me.cwd / "repos")
    (me.cwd / "job.json").write_text(json.dumps(demo_job.job_spec(repo.commit)))
    submitted = json.loads(me.run("job submit job.json --key-file payment.skey --lock"))
    job_id = str(submitted["job"]["job_id"])
    wait_for(
        "the escrow recorded",
        lambda: (
            json.loads(me.run(f"job escrow {job_id} --key-file payment.skey")).get("state")
            == "locked"
        ),
        network.root.group,
    )
    assert network.ntx_at(address) < NTX

    cancelled = json.loads(me.run(f"job cancel {job_id} --key-file payment.skey"))
    assert cancelled, cancelled
    wait_for("the NTX back", lambda: network.ntx_at(address) == NTX, network.root.group)


def test_a_new_job_repository_names_what_is_left_to_fill(tmp_path: Path) -> None:
    """docs/jobs.md: `proofnet job init my-job --framework numpy`, `cd my-job`, `proofnet job
    validate job.yaml`: the template validates but for the placeholders it leaves, each named
    by its field on one line (exit 2)."""
    me = Shell(tmp_path, {"PROOFNET_DATA_DIR": "data"})
    me.run("job init my-job --framework numpy")
    with pytest.raises(ProcessStartError, match="exited with 2") as refused:
        me.enter("my-job").run("job validate job.yaml")
    problems = (tmp_path / "my-job" / "commands.log").read_text()
    for field in ("model.repo_url", "model.commit", "image"):
        assert field in problems, problems
    assert "Traceback" not in problems and refused


def test_results_and_the_unspent_rest_back(paid_loop: PaidLoop) -> None:
    """docs/jobs.md and docs/escrow.md after the provider's work is settled (the shared loop,
    role_loop.py): `proofnet job status JOB_ID`, `job logs JOB_ID`, `job results JOB_ID` into
    the current directory, and `job escrow JOB_ID` saying what was paid and what came back."""
    me, job = paid_loop.submitter, paid_loop.job_id
    escrow: dict[str, Any] = {}

    def settled() -> bool:
        escrow.update(json.loads(me.run(f"job escrow {job} --key-file payment.skey")))
        return escrow.get("state") == "settled"

    wait_for("the settlement recorded", settled, me.group)
    closing = escrow["closing"]
    assert (
        closing["paid_ntx"] > 0
        and closing["paid_ntx"] + closing["returned_ntx"] == escrow["budget"]
    ), escrow
    assert json.loads(me.run(f"job status {job} --key-file payment.skey"))["status"] == "completed"
    assert me.run(f"job logs {job} --key-file payment.skey").strip()
    listed = me.run(f"job results {job} --key-file payment.skey")
    assert "results/metrics.json" in listed, listed
    assert json.loads((me.cwd / "results" / "metrics.json").read_text())
