"""The devnet explorer's HTML pages: a payment (metadata with a CIP-20 memo, datums, a
reference script) and a Plutus spend (redeemer, collateral, reference input), addresses,
blocks, the index and search; hostile content is escaped and bad input never gives a 500."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import server_scenario
from fake_ledger import FakeLedger
from fastapi.testclient import TestClient

from chain.devnet.explorer import explorer_tx_url
from chain.devnet.server import create_app


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[TestClient, server_scenario.Scenario]]:
    ledger = FakeLedger()
    sc = server_scenario.build(ledger)
    app = create_app(ledger, enable_faults=False, admin_token=None)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, sc


def test_payment_page_shows_memo_outputs_and_links(site) -> None:  # type: ignore[no-untyped-def]
    client, sc = site
    page = client.get(f"/explorer/tx/{sc.pay_tx}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert "memo (CIP-20, label 674)" in html and "hello devnet" in html
    assert html.index("hello devnet") < html.index("<h2>Inputs</h2>")  # shown up front
    assert f'href="/explorer/tx/{sc.fund_tx}"' in html  # the spent output's transaction
    assert f'href="/explorer/address/{sc.addr_b}"' in html
    assert f'reference script: <span class="id"><code>{sc.script_hash}</code>' in html
    assert f'hash: <span class="id"><code>{sc.hashed_datum_hash}</code>' in html
    assert "inline: <code>" in html and b"proofnet".hex() in html
    assert "confirmations" in html and f'href="/explorer/block/{sc.pay_block}"' in html
    assert "1234" in html  # the other metadata label
    # One script, ours (copy buttons, live updates); nothing loaded from elsewhere.
    assert html.count("<script") == 1 and "<script src" not in html and "http" not in html


def test_plutus_spend_shows_redeemers_and_collateral(site) -> None:  # type: ignore[no-untyped-def]
    client, sc = site
    html = client.get(f"/explorer/tx/{sc.spend_tx}").text
    assert "<h2>Redeemers</h2>" in html
    assert '<td data-label="purpose">spend</td>' in html and "5,000" in html and "1,000,000" in html
    assert sc.script_hash in html
    assert "collateral" in html and "reference input" in html
    assert "{&#34;int&#34;:7}" in html  # the redeemer data, escaped


def test_address_block_and_index_pages(site) -> None:  # type: ignore[no-untyped-def]
    client, sc = site
    html = client.get(f"/explorer/address/{sc.addr_b}").text
    assert "UTxOs" in html and f'href="/explorer/tx/{sc.spend_tx}"' in html
    block = client.get(f"/explorer/block/{sc.pay_block}")
    assert block.status_code == 200 and f'href="/explorer/tx/{sc.pay_tx}"' in block.text
    index = client.get("/explorer/")
    assert index.status_code == 200 and "Latest blocks" in index.text
    assert f'href="/explorer/tx/{sc.spend_tx}"' in index.text
    assert "1 transaction(s) in the mempool" in index.text
    # Search redirects to the right page.
    for query, target in [
        (sc.pay_tx, f"/explorer/tx/{sc.pay_tx}"),
        (str(sc.pay_block), f"/explorer/block/{sc.pay_block}"),
        (sc.addr_a, f"/explorer/address/{sc.addr_a}"),
    ]:
        found = client.get("/explorer/search", params={"q": query}, follow_redirects=False)
        assert found.status_code == 303 and found.headers["location"] == target


def test_unknown_and_bad_input_is_404_or_400_never_500(site) -> None:  # type: ignore[no-untyped-def]
    client, sc = site
    assert client.get(f"/explorer/tx/{'ab' * 32}").status_code == 404
    assert client.get(f"/explorer/tx/{sc.mempool_tx}").status_code == 404
    assert "mempool" in client.get(f"/explorer/tx/{sc.mempool_tx}").text
    assert client.get("/explorer/block/999999").status_code == 404
    assert client.get(f"/explorer/block/{'cd' * 32}").status_code == 404
    assert client.get("/explorer/tx/<script>alert(1)</script>").status_code == 404  # no route
    hostile = "<img src=x onerror=alert(1)>"
    for path in [
        f"/explorer/tx/{hostile}",
        "/explorer/tx/ABC",
        f"/explorer/address/{hostile}",
        "/explorer/block/-1",
        f"/explorer/block/{hostile}",
    ]:
        response = client.get(path)
        assert response.status_code == 400, path
        assert "<img" not in response.text
    searched = client.get("/explorer/search", params={"q": hostile})
    assert searched.status_code == 400 and "&lt;img src=x" in searched.text
    assert client.get("/explorer/search", params={"q": "ef" * 32}).status_code == 404
    assert client.get("/explorer/search").status_code == 400
    unknown = "addr_test1vpq4ekd88mvkx2ywrxtnftgplvdl900yh3k29dnwxjwqqzq5sms7c"
    assert client.get(f"/explorer/address/{unknown}").status_code == 404
    # The Blockfrost API is untouched.
    assert client.get(f"/api/v0/txs/{sc.pay_tx}").json()["hash"] == sc.pay_tx


def test_explorer_url_for_a_devnet() -> None:
    assert (
        explorer_tx_url("http://127.0.0.1:3030/api/v0", "ab" * 32)
        == f"http://127.0.0.1:3030/explorer/tx/{'ab' * 32}"
    )
