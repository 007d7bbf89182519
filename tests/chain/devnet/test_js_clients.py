"""Blaze, Lucid Evolution and Mesh against the devnet, as against Blockfrost.

Each client's own Blockfrost provider, from Node (scripts/clients/<client>.mjs), runs a
payment, a mint and a Plutus V3 lock-and-spend; the ledger then holds what each step should
have left. Needs Node and `make node` (npm ci) at the repo root.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from plutus_fixtures import ALWAYS_SUCCEEDS_UPLC, signing_key, uplc_script, wallet_address
from pycardano import (
    Address,
    Network,
    PlutusV3Script,
    Transaction,
    TransactionOutput,
    plutus_script_hash,
)

from chain.devnet.testing import RunningDevnet, running_devnet, serve_app

pytestmark = [pytest.mark.node, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
CLIENTS = REPO / "scripts" / "clients"
FUNDS = 60_000_000
COLLATERAL = 5_000_000


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDevnet]:
    with running_devnet(tmp_path_factory.mktemp("clients"), block_time=0.1) as running:
        yield running


def _script() -> PlutusV3Script:
    return uplc_script(ALWAYS_SUCCEEDS_UPLC)


def client_input(devnet: RunningDevnet, seed: int) -> dict[str, Any]:
    """A freshly funded key and what a client script reads on stdin (see common.mjs)."""
    sk = signing_key(seed)
    address = str(wallet_address(sk))
    devnet.wait_for_tx(devnet.fund(address, FUNDS))
    # An ADA-only output, as a wallet keeps for collateral: the mint's change carries tokens.
    devnet.wait_for_tx(devnet.fund(address, COLLATERAL))
    return {
        "url": devnet.url,
        "signing_key": sk.payload.hex(),
        "address": address,
        "recipient": str(wallet_address(signing_key(seed + 1000))),
        "script": bytes(_script()).hex(),
    }


def run_client(name: str, payload: dict[str, Any], timeout: float = 240) -> dict[str, str]:
    proc = subprocess.run(
        ["node", str(CLIENTS / f"{name}.mjs")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    lines = proc.stdout.strip().splitlines()
    report = json.loads(lines[-1]) if lines else {}
    assert proc.returncode == 0 and report.get("ok"), (
        f"{name} failed (rc {proc.returncode}): {report or proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )
    return dict(report["steps"])


@pytest.mark.parametrize(("client", "seed"), [("lucid", 501), ("blaze", 502), ("mesh", 503)])
def test_client_pays_mints_and_spends_a_plutus_v3_output(
    devnet: RunningDevnet, client: str, seed: int
) -> None:
    payload = client_input(devnet, seed)
    steps = run_client(client, payload)
    assert list(steps) == ["payment", "mint", "lock", "spend"]
    check_steps(devnet, payload, steps, asset_name=client.encode())


def check_steps(
    devnet: RunningDevnet, payload: dict[str, Any], steps: dict[str, str], asset_name: bytes
) -> None:
    """What each step must have left on the ledger, read from the ledger itself."""
    ledger = devnet.ledger
    paid = [_output(u).lovelace for u in ledger.utxos_at(payload["recipient"])]
    assert paid == [3_000_000]
    assert ledger.transaction(steps["payment"]) is not None

    mint = _tx(devnet, steps["mint"]).transaction_body.mint
    assert mint is not None
    ((_policy, assets),) = mint.data.items()
    assert {bytes(name.payload): qty for name, qty in assets.data.items()} == {asset_name: 42}

    script_address = str(Address(plutus_script_hash(_script()), network=Network.TESTNET))
    (locked,) = [u for u in ledger.tx_outputs(steps["lock"]) if u.address == script_address]
    assert locked.spent_by == steps["spend"]
    spend_record = ledger.transaction(steps["spend"])
    assert spend_record is not None and spend_record.valid_contract
    assert [r.tag for r in spend_record.redeemers] == ["spend"]
    witnesses = _tx(devnet, steps["spend"]).transaction_witness_set
    assert [plutus_script_hash(s) for s in witnesses.plutus_v3_script or []] == [
        plutus_script_hash(_script())
    ]


# --- the browser page -----------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


def _browser_unavailable(reason: str) -> None:
    message = f"headless Chromium unavailable: {reason} (run scripts/ci/install-chromium.sh)"
    if os.environ.get("PROOFNET_REQUIRE_BROWSER") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        _browser_unavailable(f"playwright is not installed ({e})")
    if not Path(CHROMIUM).exists():
        _browser_unavailable(f"{CHROMIUM} does not exist")
    with sync_playwright() as p:
        try:
            launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        except Exception as e:  # Playwright reports a failed launch as its own Error
            _browser_unavailable(f"{type(e).__name__}: {str(e).splitlines()[0]}")
        try:
            yield launched
        finally:
            launched.close()


def build_page(outdir: Path) -> Path:
    """Bundle Blaze for the browser with esbuild (scripts/clients/build-browser.mjs)."""
    subprocess.run(
        ["node", str(CLIENTS / "build-browser.mjs"), str(outdir)],
        check=True,
        capture_output=True,
        timeout=120,
        cwd=REPO,
    )
    return outdir


def test_blaze_in_a_browser_page_pays_across_origins(
    devnet: RunningDevnet, browser: Any, tmp_path: Path
) -> None:
    """The page is served from another origin than the devnet, so every call the bundled
    Blaze makes (parameters, UTxOs, evaluation-free submit) is a CORS request."""
    from starlette.applications import Starlette
    from starlette.staticfiles import StaticFiles

    payload = client_input(devnet, 504)
    page_dir = build_page(tmp_path / "page")
    site = Starlette()
    site.mount("/", StaticFiles(directory=page_dir, html=True))
    with serve_app(site) as origin:  # type: ignore[arg-type]
        assert urlsplit(origin).netloc != urlsplit(devnet.url).netloc  # another origin
        page = browser.new_page()
        errors: list[str] = []
        to_devnet: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on(
            "request",
            lambda req: (
                to_devnet.append(f"{req.method} {urlsplit(req.url).path}")
                if req.url.startswith(devnet.url)
                else None
            ),
        )
        page.goto(f"{origin}/index.html")
        page.wait_for_function("window.proofnetReady || window.proofnetLoadError", timeout=60_000)
        assert page.evaluate("window.proofnetLoadError ?? null") is None, errors
        result = page.evaluate(
            "input => window.proofnetPay(input)", {**payload, "lovelace": 3_000_000}
        )
    assert result["ok"], (result, errors)
    # The bundled client read parameters and UTxOs and submitted, all from the page.
    assert "GET /api/v0/epochs/latest/parameters" in to_devnet, to_devnet
    assert any(r.startswith("GET /api/v0//addresses/") for r in to_devnet), to_devnet
    assert "POST /api/v0//tx/submit" in to_devnet, to_devnet
    devnet.wait_for_tx(result["tx_hash"])
    paid = [_output(u).amount.coin for u in devnet.ledger.utxos_at(payload["recipient"])]
    assert paid == [3_000_000]


def _tx(devnet: RunningDevnet, tx_hash: str) -> Transaction:
    record = devnet.ledger.transaction(tx_hash)
    assert record is not None, tx_hash
    return Transaction.from_cbor(record.cbor)


def _output(record: Any) -> TransactionOutput:
    return TransactionOutput.from_cbor(record.output_cbor)
