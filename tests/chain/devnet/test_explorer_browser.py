"""The devnet explorer in headless Chromium: every page fits a phone's width and a desktop's
(no sideways scrolling), every id is shown in full with a copy button that copies it, and
an open page follows the chain (a block lands: the index shows it, a pending transaction's
page becomes its page) without a reload. Screenshots are saved for a person to look at.

The chain is `server_scenario` on `FakeLedger` (one of everything the pages render: a CIP-20
memo, inline and hashed datums, a reference script, a Plutus spend with redeemer, collateral
and a reference input, a transaction in the mempool), served over real HTTP; blocks are
produced by the test, so the live updates wait on the event they follow.

Chromium is Debian's (/usr/bin/chromium) driven by Playwright, as in
tests/api/test_webapp_e2e.py: when it cannot start the test fails under
PROOFNET_REQUIRE_BROWSER=1 (CI) and is skipped with the reason otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import server_scenario
from fake_ledger import FakeLedger

from chain.devnet.server import create_app
from chain.devnet.testing import serve_app

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
PHONE = {"width": 360, "height": 780}
DESKTOP = {"width": 1280, "height": 900}
TIMEOUT_MS = 60_000


def _browser_unavailable(reason: str) -> None:
    message = f"headless Chromium unavailable: {reason} (run scripts/ci/install-chromium.sh)"
    if os.environ.get("PROOFNET_REQUIRE_BROWSER") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
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


@pytest.fixture
def site() -> Iterator[tuple[str, server_scenario.Scenario]]:
    ledger = FakeLedger()
    sc = server_scenario.build(ledger)
    with serve_app(create_app(ledger, enable_faults=False, admin_token=None)) as root:
        yield root, sc


def _page(browser: Any, root: str, viewport: dict[str, int], errors: list[str]) -> Any:
    phone = viewport["width"] < 600
    context = browser.new_context(viewport=viewport, is_mobile=phone, has_touch=phone)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=root)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "request",
        lambda r: errors.append(f"outside request {r.url}") if not r.url.startswith(root) else None,
    )
    return page


def _fits(page: Any) -> bool:
    return bool(
        page.evaluate(
            "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
    )


def test_every_page_fits_and_shows_full_ids_with_copy_buttons(
    browser: Any, site: tuple[str, server_scenario.Scenario], tmp_path: Path
) -> None:
    root, sc = site
    shots = tmp_path / "screens"
    shots.mkdir()
    pages = {
        "index": "/explorer/",
        "payment": f"/explorer/tx/{sc.pay_tx}",
        "plutus-spend": f"/explorer/tx/{sc.spend_tx}",
        "address": f"/explorer/address/{sc.addr_a}",
        "script-address": f"/explorer/address/{sc.script_addr}",
        "block": f"/explorer/block/{sc.pay_block}",
        "pending": f"/explorer/tx/{sc.mempool_tx}",
    }
    errors: list[str] = []
    for size, viewport in (("phone", PHONE), ("desktop", DESKTOP)):
        page = _page(browser, root, viewport, errors)
        for name, path in pages.items():
            page.goto(root + path)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert _fits(page), (size, name, width)
            page.screenshot(path=str(shots / f"{size}-{name}.png"), full_page=True)
            assert (shots / f"{size}-{name}.png").stat().st_size > 3_000
        page.context.close()
    assert errors == []

    # Full ids, each with its copy button, on the settlement-like pages.
    page = _page(browser, root, PHONE, errors)
    page.goto(f"{root}/explorer/tx/{sc.spend_tx}")
    copies = page.eval_on_selector_all("button.copy", "bs => bs.map(b => b.dataset.copy)")
    assert sc.spend_tx in copies and sc.redeemer_script in copies
    assert any(c.startswith(sc.pay_tx + "#") or c.startswith(sc.fund_tx + "#") for c in copies)
    assert all(len(c) >= 56 for c in copies), copies  # never a shortened id
    assert page.is_visible(f"text={sc.spend_tx}")
    # The button copies the full id (read back from the clipboard).
    page.click(f'button.copy[data-copy="{sc.spend_tx}"] >> nth=0')
    page.wait_for_function(
        "id => [...document.querySelectorAll('button.copy')].some("
        "b => b.dataset.copy === id && b.textContent === 'copied')",
        arg=sc.spend_tx,
    )
    assert page.evaluate("navigator.clipboard.readText()") == sc.spend_tx
    page.context.close()
    assert errors == []


def test_an_open_page_follows_the_chain(
    browser: Any, site: tuple[str, server_scenario.Scenario]
) -> None:
    root, sc = site
    ledger = sc.ledger
    errors: list[str] = []
    index = _page(browser, root, PHONE, errors)
    index.goto(f"{root}/explorer/")
    pending = _page(browser, root, PHONE, errors)
    pending.goto(f"{root}/explorer/tx/{sc.mempool_tx}")
    assert "waits in the mempool" in pending.inner_text("main")
    before = ledger.tip().height

    block = ledger.produce_block()  # the event both pages follow
    assert block is not None and block.height == before + 1 and sc.mempool_tx in block.tx_hashes

    index.wait_for_function("h => document.body.dataset.tip === String(h)", arg=block.height)
    assert f"tip: block {block.height}" in index.inner_text("main")
    assert index.is_visible(f'a[href="/explorer/tx/{sc.mempool_tx}"]')
    pending.wait_for_function("h => document.body.dataset.tip === String(h)", arg=block.height)
    text = pending.inner_text("main")
    assert "waits in the mempool" not in text and "confirmations" in text
    assert _fits(pending)
    assert errors == []
