"""`proofnet demo`: the whole loop on embedded defaults, on this machine.

Today it covers the chain half: start the devnet, fund a submitter wallet, mint test NTX
and pay part of it to a provider in a real transaction built with pycardano through the
same Blockfrost-compatible backend the other roles use.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from proofnet.processes import RoleProcess, free_port

NTX_NAME_HEX = b"NTX".hex()


def _wait_for_tx(client: httpx.Client, url: str, tx_hash: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.get(f"{url}/txs/{tx_hash}").status_code == 200:
            return
        time.sleep(0.1)
    raise TimeoutError(f"transaction {tx_hash} not confirmed within {timeout}s")


def _balances(client: httpx.Client, url: str, address: str, unit: str) -> tuple[int, int]:
    response = client.get(f"{url}/addresses/{address}")
    if response.status_code == 404:
        return 0, 0
    response.raise_for_status()
    amounts = {a["unit"]: int(a["quantity"]) for a in response.json()["amount"]}
    return amounts.get("lovelace", 0), amounts.get(unit, 0)


def run_demo(data_dir: Path | None = None, console: Console | None = None) -> dict[str, str]:
    from pycardano import (
        Address,
        Asset,
        AssetName,
        BlockFrostChainContext,
        MultiAsset,
        Network,
        PaymentSigningKey,
        ScriptHash,
        TransactionBuilder,
        TransactionOutput,
        Value,
    )

    console = console or Console()
    workdir = data_dir or Path(tempfile.mkdtemp(prefix="proofnet-demo-"))
    port = free_port()
    root = f"http://127.0.0.1:{port}/api"
    url = f"{root}/v0"
    devnet = RoleProcess(
        "devnet",
        [
            "devnet",
            "up",
            "--data-dir",
            str(workdir / "devnet"),
            "--port",
            str(port),
            "--block-time",
            "0.5",
        ],
        workdir / "logs" / "devnet.log",
    )
    with console.status("starting the devnet"):
        devnet.start()
    try:
        devnet.wait_healthy(f"{url}/health")
        console.print(f"[green]devnet[/] up at {url} (data in {workdir / 'devnet'})")
        client = httpx.Client(timeout=30)
        status = client.get(f"{url}/admin/status").json()
        policy = status["faucet_policy_id"]
        unit = policy + NTX_NAME_HEX

        submitter_key = PaymentSigningKey.generate()
        provider_key = PaymentSigningKey.generate()
        submitter = Address(submitter_key.to_verification_key().hash(), network=Network.TESTNET)
        provider = Address(provider_key.to_verification_key().hash(), network=Network.TESTNET)

        with console.status("funding the submitter and minting test NTX"):
            funded = client.post(
                f"{url}/admin/fund",
                json={
                    "address": str(submitter),
                    "lovelace": 100_000_000,
                    "assets": {NTX_NAME_HEX: 1_000_000},
                },
            )
            funded.raise_for_status()
            fund_tx = funded.json()["tx_hash"]
            _wait_for_tx(client, url, fund_tx)
        console.print(f"funded [cyan]{submitter}[/] (tx {fund_tx})")

        context = BlockFrostChainContext(project_id="devnet", base_url=root)
        builder = TransactionBuilder(context)
        builder.add_input_address(submitter)
        ntx = MultiAsset({ScriptHash(bytes.fromhex(policy)): Asset({AssetName(b"NTX"): 250_000})})
        builder.add_output(TransactionOutput(provider, Value(2_000_000, ntx)))
        with console.status("paying 250,000 test NTX to the provider"):
            signed = builder.build_and_sign([submitter_key], change_address=submitter)
            context.submit_tx(signed)
            tx_hash = str(signed.id)
            _wait_for_tx(client, url, tx_hash)

        table = Table(title="balances")
        table.add_column("wallet")
        table.add_column("ADA", justify="right")
        table.add_column("test NTX", justify="right")
        for name, address in (("submitter", submitter), ("provider", provider)):
            lovelace, qty = _balances(client, url, str(address), unit)
            table.add_row(name, f"{lovelace / 1_000_000:,.6f}", f"{qty:,}")
        console.print(table)
        console.print(f"transfer tx: {tx_hash}")
        console.print(f"explorer: {url}/txs/{tx_hash}")
        return {"transfer_tx": tx_hash, "fund_tx": fund_tx, "ntx_unit": unit}
    finally:
        devnet.stop()
