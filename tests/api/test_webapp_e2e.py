"""The web app served by the API: its static files (fast tests), and one end-to-end run in
headless Chromium with a CIP-30 test wallet injected into the page whose signatures are
made here, with a real key, so the API verifies genuine CIP-8 and transaction witnesses.

Chromium is Debian's (/usr/bin/chromium) driven by Playwright; `scripts/ci/install-chromium.sh`
installs both. When the browser cannot start the test fails under PROOFNET_REQUIRE_BROWSER=1
(CI) and is skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_support import RELEASE_ORACLE, FakeClock, Wallet, Worker, job_spec, release_results
from fastapi.testclient import TestClient
from movement_support import add_movement
from nacl.signing import SigningKey
from pycardano import Address, Network, UTxO
from pycardano.cip import cip8
from sqlmodel import select
from web_fixtures import WALLET_NTX, EscrowWorld, escrow_world, witness_set_hex

from api.app import create_app
from api.client_cli import JobClient
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.migrate import upgrade_head
from api.models import Job, JobEscrow, User
from api.routes.web import WEB_DIR
from api.services.balances import clear_caches
from api.services.cancel_quorum import Member
from api.services.users import add_senior
from chain.devnet.testing import serve_app
from oracle.intake.feed_client import HttpApiFeed
from oracle.settlement.cancel import CancelCoSigner
from oracle.settlement.chain_view import BlockfrostChainView
from oracle.storage.db import make_engine as make_oracle_engine
from oracle.storage.schema import create_tables

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
BUDGET = 2_500_000
TIMEOUT_MS = 60_000
PHONE = {"width": 390, "height": 844}

# --- the static files --------------------------------------------------------------------


def test_the_page_and_its_modules_are_served_with_a_strict_policy(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "script-src 'self'" in policy
    assert "connect-src 'self'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert 'id="job-form"' in page.text and 'src="/app/js/main.js"' in page.text
    module = client.get("/app/js/main.js")
    assert module.status_code == 200
    assert module.headers["content-type"].startswith("text/javascript")
    assert client.get("/app/app.css").headers["content-type"].startswith("text/css")
    assert client.get("/app/index.html").status_code == 200
    assert client.get("/app/").headers["content-type"].startswith("text/html")
    for bad in ("/app/../app.py", "/app/%2e%2e/routes/web.py", "/app/js/nope.js", "/app/.x.js"):
        response = client.get(bad)
        assert response.status_code == 404, (bad, response.status_code)


def test_nothing_in_the_app_loads_from_elsewhere() -> None:
    """Every script, style and import is relative to this server: the app runs offline."""
    files = [p for p in WEB_DIR.rglob("*") if p.is_file() and p.suffix in (".html", ".js", ".css")]
    assert {p.name for p in files} >= {"index.html", "app.css", "main.js", "wallet.js", "api.js"}
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text), path
        assert not re.search(r"""\bimport\b[^;]*["'](?:https?:)?//""", text), path
        assert not re.search(r"@import|url\(\s*[\"']?(?:https?:)?//", text), path
        for target in re.findall(r"""from\s+["'](\.[^"']+)["']""", text):
            assert (path.parent / target).resolve().is_file(), (path, target)


def test_the_api_reference_is_served_from_this_server_without_a_cdn(client: TestClient) -> None:
    moved = client.get("/docs", follow_redirects=False)
    assert moved.status_code == 308 and moved.headers["location"] == "/api/v1/docs"
    page = client.get("/api/v1/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self';" in page.headers["content-security-policy"]
    scripts = re.findall(r'src="([^"]+)"', page.text)
    assert scripts == ["/api/v1/docs/assets/swagger-ui-bundle.js", "/app/js/docs.js"]
    for path in (*scripts, "/api/v1/docs/assets/swagger-ui.css", "/app/docs.css"):
        asset = client.get(path)
        assert asset.status_code == 200, path
    bundle = client.get(scripts[0])
    assert bundle.headers["content-type"].startswith("text/javascript")
    assert len(bundle.content) > 500_000 and b"SwaggerUIBundle" in bundle.content
    for bad in ("/api/v1/docs/assets/redoc.standalone.js", "/api/v1/docs/assets/..%2fcore.py"):
        assert client.get(bad).status_code == 404, bad
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    assert "/api/v1/jobs/{job_id}/escrow/cancel/build" in paths
    assert "/api/v1/jobs/{job_id}/escrow" in paths and "/api/v1/network" in paths


# --- the browser run ---------------------------------------------------------------------


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


ICON = (
    "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 20 20'%3E"
    "%3Ccircle cx='10' cy='10' r='9' fill='%231f5f8b'/%3E%3C/svg%3E"
)

# The CIP-30 wallet the page sees: every call goes to a Python function of this test.
WALLET_SCRIPT = """
(() => {
  const call = (name, ...args) => window[name](...args);
  const api = {
    getNetworkId: async () => 0,
    getUsedAddresses: async () => [await call("pnAddress")],
    getUnusedAddresses: async () => [],
    getChangeAddress: async () => call("pnAddress"),
    getRewardAddresses: async () => [],
    getUtxos: async () => call("pnUtxos"),
    getBalance: async () => "00",
    signData: async (addr, payload) => call("pnSignData", addr, payload),
    signTx: async (tx, partialSign) => call("pnSignTx", tx, Boolean(partialSign)),
    submitTx: async () => { throw { code: -1, info: "the test wallet does not submit" }; },
  };
  window.cardano = Object.assign(window.cardano || {}, {
    testwallet: {
      name: "Test wallet",
      icon: "%ICON%",
      apiVersion: "0.1.0",
      enable: async () => api,
      isEnabled: async () => true,
    },
  });
})();
""".replace("%ICON%", ICON)

# A second wallet in the same browser, on mainnet: the page must refuse it before signing.
MAINNET_WALLET_SCRIPT = """
(() => {
  const refuse = async () => { window.pnMainnetCalls = (window.pnMainnetCalls || 0) + 1;
    throw { code: -1, info: "the mainnet wallet must not be asked to sign" }; };
  const api = {
    getNetworkId: async () => 1,
    getUsedAddresses: async () => [], getUnusedAddresses: async () => [],
    getChangeAddress: refuse, getRewardAddresses: async () => [], getUtxos: refuse,
    getBalance: async () => "00", signData: refuse, signTx: refuse, submitTx: refuse,
  };
  window.cardano = Object.assign(window.cardano || {}, {
    mainwallet: { name: "Mainnet wallet", icon: "", apiVersion: "0.1.0",
      enable: async () => api, isEnabled: async () => true },
  });
})();
"""


class InjectedWallet:
    """What the injected wallet does, done here with a real key: the world's funded test
    wallet, or `wallet` (an applicant's, another senior's)."""

    def __init__(self, world: EscrowWorld, wallet: Wallet | None = None) -> None:
        self.world = world
        self.wallet = wallet or world.wallet
        self.calls: list[str] = []
        self.messages: list[str] = []

    @property
    def _address(self) -> Address:
        return Address.from_primitive(self.wallet.address)

    def address(self) -> str:
        self.calls.append("address")
        return bytes(self._address.to_primitive()).hex()

    def utxos(self) -> list[str]:
        self.calls.append("utxos")
        found: list[UTxO] = list(self.world.world.context.utxos(self._address))
        return [u.to_cbor_hex() for u in found]

    def sign_data(self, address: str, payload_hex: str) -> dict[str, str]:
        self.calls.append("signData")
        assert Address.from_primitive(address) == self._address, address
        message = bytes.fromhex(payload_hex).decode("utf-8")
        self.messages.append(message)
        signed = cip8.sign(
            message, self.wallet.signing_key, attach_cose_key=True, network=Network.TESTNET
        )
        assert isinstance(signed, dict)
        return {"signature": signed["signature"], "key": signed["key"]}

    def sign_tx(self, tx_cbor: str, partial: bool) -> str:
        self.calls.append("signTx")
        assert partial is True  # the app asks for its own witnesses only
        return witness_set_hex(tx_cbor, self.wallet.signing_key)

    def install(self, context: Any) -> None:
        context.expose_function("pnAddress", self.address)
        context.expose_function("pnUtxos", self.utxos)
        context.expose_function("pnSignData", self.sign_data)
        context.expose_function("pnSignTx", self.sign_tx)
        context.add_init_script(WALLET_SCRIPT)


@dataclass
class Served:
    root: str
    world: EscrowWorld
    engine: Any
    config: ApiConfig
    clock: FakeClock
    app: Any
    oracle_engine: Any


class InProcessQuorum:
    """The API's cancel quorum, with the oracle's co-signer called in this process (its
    checks run for real, over the API's signed feed and its own store; only the HTTP hop
    between API and oracle is left out: test_escrow_cancel.py covers it)."""

    def __init__(self, cosigner: Any) -> None:
        self.cosigner = cosigner

    def members(self) -> list[Member]:
        return [Member("in-process oracle", self.cosigner.key_hash.payload.hex())]

    def cosign(self, member: Member, tx_cbor: str) -> bytes:
        return bytes(self.cosigner.review(bytes.fromhex(tx_cbor)))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """The API on a real port, backed by a devnet with the protocol deployed, and one oracle
    co-signing cancels."""
    from api.services.balances import BalanceSources, CachedLookups, ContextChainReader

    with escrow_world(tmp_path / "world") as world:
        oracle_wallet = world.world.oracle_quorum[0]
        oracle_ed25519 = SigningKey(oracle_wallet.signing_key.payload)
        config = ApiConfig(
            database_url=f"sqlite:///{tmp_path / 'api.db'}",
            network="devnet",
            rate_limit_per_minute=100_000,
            claim_requires_escrow=True,
            approval_endorsements=2,
            # The quorum's oracle, and the test oracle whose verdicts release results
            # (api_support.release_results).
            oracle_keys=(
                bytes(oracle_ed25519.verify_key).hex(),
                bytes(RELEASE_ORACLE.verify_key).hex(),
            ),
            # One attempt and a minute to settle: a one-second job's deadline passes about a
            # minute of chain time after locking (a few seconds of wall time on the devnet).
            max_attempts=1,
            settlement_window_s=65,
        )
        engine = make_engine(config.database_url)
        upgrade_head(engine)
        clock = FakeClock()
        app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)
        app.state.run_notifier = False
        world.attach(app)
        unit = world.world.deployment.ntx_unit
        chain = ContextChainReader(lambda: world.world.context, unit)
        sources = BalanceSources(
            CachedLookups(chain, None, ttl_s=0.5), world.world.devnet.url, unit
        )
        app.state.balance_sources = sources
        oracle_engine = make_oracle_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
        create_tables(oracle_engine)
        with open_session(engine) as session:  # pre-approved, as seniors are
            add_senior(session, config, world.wallet.address, clock())
        with serve_app(app) as root:
            app.state.cancel_quorum = InProcessQuorum(
                CancelCoSigner(
                    world.world.deployment,
                    BlockfrostChainView(world.world.devnet.url),
                    oracle_wallet.signing_key,
                    HttpApiFeed(root, oracle_ed25519, "devnet", ttl_s=0.0),
                    oracle_engine,
                )
            )
            yield Served(root, world, engine, config, clock, app, oracle_engine)
        engine.dispose()
        oracle_engine.dispose()


def _ntx(page: Any, row: str) -> str:
    return str(
        page.get_attribute(f'#balance-rows tr[data-balance="{row}"] td[data-ntx]', "data-ntx")
    )


def _sign_in(page: Any, address: str) -> None:
    """Connect the injected wallet and sign in with a genuine CIP-8 signature."""
    choice = '#wallet-list button[data-wallet="testwallet"]'
    page.wait_for_selector(choice)
    page.click(choice)
    page.wait_for_function(
        "a => document.getElementById('account-address').textContent === a", arg=address
    )
    page.click("#sign-in")
    page.wait_for_function(
        "() => document.getElementById('account-signed-in').textContent === 'yes'"
    )


def _fits_the_screen(page: Any) -> bool:
    """Nothing wider than the viewport (no sideways scrolling on a phone)."""
    return bool(
        page.evaluate(
            "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
    )


def _phone_page(browser: Any, wallet: InjectedWallet, root: str, errors: list[str]) -> Any:
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    wallet.install(context)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(root + "/")
    _sign_in(page, wallet.wallet.address)
    return page


def _approval_flow(
    browser: Any,
    page: Any,
    senior: InjectedWallet,
    served: Served,
    tmp_path: Path,
) -> None:
    """A new wallet applies on a phone; the senior on `page` endorses it with a wallet
    signature, a second senior on a phone does too, and the applicant follows it, as
    "1 of 2 endorsements, by ..." and then "approved"."""
    root, world, engine, config = served.root, served.world, served.engine, served.config
    errors: list[str] = []
    applicant = InjectedWallet(world, Wallet())
    mobile = _phone_page(browser, applicant, root, errors)
    mobile.wait_for_selector("#apply-form:not([hidden])")
    assert mobile.inner_text("#account-approved") == "not approved yet"
    assert mobile.is_hidden("#approvals")  # only senior members endorse
    mobile.fill("#apply-statement", "I fine-tune small vision models")
    mobile.click("#apply-form button[type=submit]")
    mobile.wait_for_function(
        "() => document.getElementById('account-approved').textContent"
        ".startsWith('applied; 0 of 2 endorsements')"
    )
    assert mobile.is_visible("#refresh-application") and _fits_the_screen(mobile)

    # The senior sees the application, with its statement, and endorses it in the wallet.
    page.click("#refresh-approvals")
    row = "#approval-rows li[data-application]"
    page.wait_for_selector(row)
    assert "I fine-tune small vision models" in page.inner_text(row)
    assert "0 of 2 endorsements" in page.inner_text(row)
    number = page.get_attribute(row, "data-application")
    page.click(f"{row} button[data-endorse]")
    page.wait_for_selector(f'{row} [data-endorser="{senior.wallet.address}"]')
    assert senior.messages[-1].startswith("proofnet endorsement v1\nnetwork: devnet\n")
    assert (
        f"applicant: {applicant.wallet.address}\napplication: {number}\n" in (senior.messages[-1])
    )
    assert "1 of 2 endorsements, by" in page.inner_text(row)
    assert page.is_disabled(f"{row} button[data-endorse]")  # a key endorses once

    # The applicant sees the progress and who endorsed.
    mobile.click("#refresh-application")
    mobile.wait_for_selector(f'#account-approved [data-endorser="{senior.wallet.address}"]')
    assert mobile.inner_text("#account-approved").startswith("applied; 1 of 2 endorsements, by")

    # A second senior, on a phone, endorses too: the applicant is approved.
    other = InjectedWallet(world, Wallet())
    with open_session(engine) as session:
        add_senior(session, config, other.wallet.address, datetime.now(UTC))
    second = _phone_page(browser, other, root, errors)
    second.wait_for_selector(f'#approval-rows li[data-application="{number}"]')
    assert _fits_the_screen(second)
    shot = tmp_path / "approvals-phone.png"
    second.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 5_000
    second.click(f'#approval-rows li[data-application="{number}"] button[data-endorse]')
    second.wait_for_function(
        "() => document.getElementById('notice').textContent.includes('approved submitter')"
    )
    assert other.calls.count("signData") == 2  # sign-in and the endorsement
    mobile.click("#refresh-application")
    mobile.wait_for_function(
        "() => document.getElementById('account-approved').textContent === 'approved'"
    )
    assert mobile.is_hidden("#refresh-application") and mobile.is_hidden("#apply-form")
    assert _fits_the_screen(mobile)
    with open_session(engine) as session:
        user = session.exec(select(User).where(User.address == applicant.wallet.address)).one()
        assert user.is_approved
    assert not errors, json.dumps(errors)
    mobile.context.close()
    second.context.close()


@pytest.mark.slow
def test_a_submitter_posts_a_job_and_locks_its_escrow_and_seniors_endorse_in_the_browser(
    browser: Any, served: Served, tmp_path: Path
) -> None:
    root, world, engine = served.root, served.world, served.engine
    context = browser.new_context(viewport={"width": 1280, "height": 1400})
    wallet = InjectedWallet(world)
    wallet.install(context)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    console_errors: list[str] = []
    refused: list[str] = []  # API answers >= 400 other than the one this test provokes
    page.on("pageerror", lambda e: console_errors.append(str(e)))
    page.on(
        "response",
        lambda r: (
            refused.append(f"{r.status} {r.request.method} {r.url}") if r.status >= 400 else None
        ),
    )
    page.goto(root + "/")

    # Connect and sign in with a genuine CIP-8 signature.
    _sign_in(page, world.wallet.address)
    assert page.inner_text("#account-approved") == "approved"
    # A senior member: the applications to endorse are shown (none yet).
    page.wait_for_selector("#approval-rows li.empty")
    assert "signData" in wallet.calls
    page.wait_for_selector('#balance-rows tr[data-balance="available"]')
    assert _ntx(page, "available") == str(WALLET_NTX)

    # Client-side validation stops a bad spec before it is posted.
    spec = job_spec(gpus=0)
    page.fill("#f-repo", spec["model"]["repo_url"])
    page.fill("#f-commit", "not-a-commit")
    page.fill("#f-image", spec["image"])
    page.fill("#f-commands", "python train.py --epochs 1")
    page.fill("#f-gpus", "0")
    page.fill("#f-gpu-mem", "0")
    page.fill("#f-price", "2.5")  # NTX, with its six decimals: BUDGET base units
    page.fill("#f-seed", "42")
    page.click("#post-job")
    page.wait_for_selector("#form-errors li")
    assert "commit must be 40" in page.inner_text("#form-errors")
    assert page.get_attribute("#f-commit", "aria-invalid") == "true"
    with open_session(engine) as session:
        assert session.exec(select(Job)).all() == []

    page.fill("#f-commit", spec["model"]["commit"])
    page.click("#post-job")
    page.wait_for_selector("#job:not([hidden])")
    job_id = page.inner_text("#job-id")
    assert re.fullmatch(r"[0-9a-f]{64}", job_id)
    page.wait_for_function("() => document.getElementById('job-status').textContent === 'queued'")
    assert page.inner_text("#job-reason").startswith("waiting for its escrow")

    # The same spec again: the server's refusal is shown in the form.
    page.fill("#f-seed", "42")
    page.click("#post-job")
    page.wait_for_function(
        "() => document.getElementById('form-errors').textContent.includes('exists')"
    )
    assert "The server refused the job" in page.inner_text("#form-errors")

    # Sign the escrow in the wallet; the API submits and records it.
    page.click("#lock-escrow")
    page.wait_for_selector('#job-escrow[data-state="locked"]', timeout=120_000)
    assert wallet.calls.count("signTx") == 1 and "utxos" in wallet.calls
    ref = page.inner_text("#escrow-ref")
    tx_id, index = ref.split("#")
    assert index == "0"
    with open_session(engine) as session:
        job = session.exec(select(Job).where(Job.job_id == job_id)).one()
        row = session.exec(select(JobEscrow).where(JobEscrow.job_id == job.id)).one()
        assert (row.tx_id, row.output_index, row.budget) == (tx_id, 0, BUDGET)
    escrows = world.world.utxos_of(tx_id, world.world.deployment.escrow_address, 1)
    assert escrows, "the escrow is on chain"
    # Status moves on: the job now waits for a provider, not for its escrow.
    page.wait_for_function(
        "() => !document.getElementById('job-reason').textContent.startsWith('waiting for its escrow')"
    )
    assert page.inner_text("#job-status") == "queued"
    assert page.is_hidden("#lock-escrow")  # one escrow per job

    # The balance dropped by the budget.
    expected = str(WALLET_NTX - BUDGET)
    page.wait_for_function(
        """e => { document.getElementById('refresh-balances').click();
           const c = document.querySelector('#balance-rows tr[data-balance="available"] td[data-ntx]');
           return c && c.dataset.ntx === e; }""",
        arg=expected,
        polling=1000,
    )
    assert world.holdings()[1] == WALLET_NTX - BUDGET
    page.click("#refresh-jobs")
    page.wait_for_selector(f'#job-rows tr[data-job="{job_id}"]')

    # What the chain watcher records (api.services.chain_watch) shows under Balances: the
    # payout and the refund with their transaction and block.
    with open_session(engine) as session:
        add_movement(session, address=world.wallet.address, ntx=1_234, tx_hash="ab" * 32)
        add_movement(
            session,
            address=world.wallet.address,
            ntx=66,
            tx_hash="cd" * 32,
            kind="refund",
            action="refund",
            job_id=job_id,
        )
    clear_caches()
    page.click("#refresh-balances")
    payout = page.wait_for_selector(f'#payouts li[data-tx="{"ab" * 32}"]')
    assert payout is not None and "0.001234 NTX" in payout.inner_text()
    assert "in block 1" in payout.inner_text()
    refund = page.inner_text('#refunds li[data-kind="refund"]')
    assert "0.000066 NTX back from job" in refund and "(refund)" in refund
    assert _ntx(page, "earned") == "1234" and _ntx(page, "refunded") == "66"

    shot = tmp_path / "main.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    for selector in (
        "#account",
        "#balances",
        "#post",
        "#jobs",
        "#job",
        "#job-form",
        "#cancel-job",
        "#approvals",
    ):
        assert page.is_visible(selector), selector
    assert not console_errors, json.dumps(console_errors)
    assert refused == [f"409 POST {root}/api/v1/jobs"], refused

    _approval_flow(browser, page, wallet, served, tmp_path)
    assert not console_errors, json.dumps(console_errors)
    assert refused == [f"409 POST {root}/api/v1/jobs"], refused
    context.close()


# --- money back, the state from the API, and every page at desktop and phone width ---------

DESKTOP = {"width": 1280, "height": 900}


def _context(browser: Any, viewport: dict[str, int], wallet: InjectedWallet) -> Any:
    phone = viewport["width"] < 600
    context = browser.new_context(viewport=viewport, is_mobile=phone, has_touch=phone)
    wallet.install(context)
    return context


def _page(context: Any, root: str, errors: list[str], outside: list[str]) -> Any:
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.on("pageerror", lambda e: errors.append(str(e)))
    # Nothing the app or the docs load may come from elsewhere (the wallet icon is data:).
    page.on(
        "request",
        lambda r: outside.append(r.url) if not r.url.startswith((root, "data:")) else None,
    )
    return page


def _layout(page: Any, shots: Path, name: str, *visible: str) -> None:
    """The page fits its viewport (no sideways scrolling), its key elements are visible,
    and its screenshot is saved for a person to look at."""
    assert _fits_the_screen(page), (name, page.evaluate("document.documentElement.scrollWidth"))
    for selector in visible:
        assert page.is_visible(selector), (name, selector)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    assert (shots / f"{name}.png").stat().st_size > 5_000


def _locked_from_the_cli(served: Served, amount: int, max_duration_s: int = 3600) -> str:
    """A job posted and locked with `proofnet job` (the key file client), not the browser."""
    cli = JobClient(served.root, served.world.wallet.signing_key, http=httpx.Client(timeout=120))
    spec = job_spec()
    spec["resources"]["max_duration_s"] = max_duration_s
    spec["pricing"] = {"kind": "fixed", "amount": amount}
    job_id = str(cli.submit(spec)["job_id"])
    assert cli.lock(job_id)["recorded"] is True
    return job_id


def _open_job(page: Any, job_id: str, state: str) -> None:
    page.click("#refresh-jobs")
    page.click(f'#job-rows tr[data-job="{job_id}"] button')
    page.wait_for_function("j => document.getElementById('job-id').textContent === j", arg=job_id)
    page.wait_for_selector(f'#job-escrow[data-state="{state}"]')


def _no_slots(page: Any) -> None:
    assert "slot" not in page.inner_text("body").lower()


@pytest.mark.slow
def test_money_back_and_the_state_from_the_api_at_desktop_and_phone_width(
    browser: Any, served: Served, tmp_path: Path
) -> None:
    root, world = served.root, served.world
    shots = tmp_path / "screens"
    shots.mkdir()
    errors: list[str] = []
    outside: list[str] = []
    wallet = InjectedWallet(world)

    # A provider with a price, online: shown before posting.
    provider = Worker(TestClient(served.app), clock=served.clock)
    provider.register([("NVIDIA A100-SXM4-80GB", 81920)])
    priced = provider.request(
        "PUT", "/api/v1/worker/rate-card", {"rates": {"NVIDIA A100-SXM4-80GB": 1_750_000}}
    )
    assert priced.status_code == 200, priced.text

    # The signed-out page on a phone: the network badge and the wallet chooser fit.
    phone = _context(browser, PHONE, wallet)
    mobile = _page(phone, root, errors, outside)
    mobile.goto(root + "/")
    mobile.wait_for_selector('#wallet-list button[data-wallet="testwallet"]')
    assert mobile.inner_text("#network-badge") == "devnet"
    _layout(mobile, shots, "signed-out-phone", "#network-badge", "#wallet-list", "#post")

    # Desktop: two wallets, each with its name (and icon); the mainnet one is refused before
    # it is asked for anything.
    desktop = _context(browser, DESKTOP, wallet)
    desktop.add_init_script(MAINNET_WALLET_SCRIPT)
    page = _page(desktop, root, errors, outside)
    page.goto(root + "/")
    page.wait_for_selector('#wallet-list button[data-wallet="mainwallet"]')
    choice = '#wallet-list button[data-wallet="testwallet"]'
    assert page.inner_text(choice) == "Test wallet"
    assert page.get_attribute(f"{choice} img", "src") == ICON
    page.click('#wallet-list button[data-wallet="mainwallet"]')
    page.wait_for_selector("#notice.error")
    assert "this API settles on devnet" in page.inner_text("#notice")
    assert "bad" in str(page.get_attribute("#network-badge", "class"))
    assert page.evaluate("window.pnMainnetCalls || 0") == 0 and wallet.calls == []
    assert page.is_hidden("#sign-in")
    _sign_in(page, world.wallet.address)
    assert "good" in str(page.get_attribute("#network-badge", "class"))

    # Before posting: the providers online with their price, and the estimate.
    page.wait_for_selector("#provider-rows tr[data-provider]")
    assert "NVIDIA A100-SXM4-80GB: 1.75" in page.inner_text("#provider-rows")
    spec = job_spec()
    page.fill("#f-repo", spec["model"]["repo_url"])
    page.fill("#f-commit", spec["model"]["commit"])
    page.fill("#f-image", spec["image"])
    page.fill("#f-price", "2.5")
    page.click("#estimate-job")
    page.wait_for_selector("#estimate:not([hidden]) [data-estimate=cost]")
    assert page.get_attribute("#estimate [data-estimate=cost]", "data-cap") == "2500000"
    assert "at most 2.5 NTX locked in escrow" in page.inner_text("#estimate")
    # The verifiers' fee is shown as the part of the price they are paid (5 %).
    fee = "#estimate [data-estimate=verification-fee]"
    assert page.get_attribute(fee, "data-fee-high") == "125000"
    assert "0.125 NTX of the cost" in page.inner_text(fee)

    # A job locked from the CLI shows its real state here; cancelling it before any work
    # returns the whole escrow at once (the wallet signs, the oracle co-signs).
    ntx_start = world.holdings()[1]
    cancelled = _locked_from_the_cli(served, 3_000_000)
    _open_job(page, cancelled, "locked")
    assert "3 NTX" in page.inner_text("#job-escrow")
    assert re.search(
        r"deadline \d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? UTC \(in ", page.inner_text("#job-escrow")
    )
    assert page.inner_text("#cancel-job") == "Cancel and take the escrow back"
    assert "no provider has started the job" in page.inner_text("#escrow-hint")
    assert page.get_attribute("#job-escrow a[data-explorer=devnet]", "href").startswith(
        world.world.devnet.url.removesuffix("/api/v0") + "/explorer/tx/"
    )
    _no_slots(page)
    _layout(page, shots, "job-locked-desktop", "#job-escrow", "#cancel-job", "#refund-escrow")
    signed = wallet.calls.count("signTx")
    page.click("#cancel-job")
    page.wait_for_function(
        "() => document.getElementById('notice').textContent.includes('comes back')"
    )
    assert wallet.calls.count("signTx") == signed + 1
    page.wait_for_selector('#job-escrow:not([data-state="locked"])')
    # The escrow's new state is drawn first; the job's status follows on the page's next read.
    page.wait_for_function(
        "() => document.getElementById('job-status').textContent === 'cancelled'"
    )
    end = time.monotonic() + 60
    while world.holdings()[1] != ntx_start and time.monotonic() < end:
        time.sleep(0.25)
    assert world.holdings()[1] == ntx_start  # all of it, at once

    # A settled job viewed in another browser (a phone): what was paid, what came back, the
    # settlement transaction with its block, confirmations and explorer link.
    settled = _locked_from_the_cli(served, 2_500_000)
    with open_session(served.engine) as session:
        escrow = session.exec(
            select(JobEscrow).join(Job).where(Job.job_id == settled)  # type: ignore[arg-type]
        ).one()
        ref = (escrow.tx_id, escrow.output_index)
        add_movement(
            session,
            address=Wallet().address,
            ntx=1_500_000,
            tx_hash="5e" * 32,
            job_id=settled,
            escrow=ref,
            block_height=3,
        )
        add_movement(
            session,
            address=world.wallet.address,
            ntx=1_000_000,
            tx_hash="5e" * 32,
            kind="refund",
            job_id=settled,
            escrow=ref,
            output_index=1,
            block_height=3,
        )
    clear_caches()
    _sign_in(mobile, world.wallet.address)
    _open_job(mobile, settled, "settled")
    closing = mobile.inner_text("#escrow-closing")
    assert "Settled in" in closing and "block 3" in closing
    assert "paid 1.5 NTX to providers, returned 1 NTX" in closing
    assert mobile.is_visible("#escrow-closing a[data-explorer=devnet]")
    _no_slots(mobile)
    _layout(mobile, shots, "job-settled-phone", "#job-escrow", "#balances", "#jobs")

    # Base units on request, everywhere amounts are shown.
    mobile.click("#units-toggle")
    mobile.wait_for_function(
        "() => document.getElementById('escrow-closing').textContent"
        ".includes('paid 1,500,000 base units')"
    )
    assert mobile.inner_text("#ntx-head") == "NTX base units"
    mobile.click("#units-toggle")
    mobile.wait_for_function(
        "() => document.getElementById('escrow-closing').textContent.includes('paid 1.5 NTX')"
    )

    # A refund after the deadline, one click in the wallet: a one-second job's deadline
    # passes on chain about a minute after locking (seconds of wall time on the devnet).
    refunded = _locked_from_the_cli(served, 1_000_000, max_duration_s=1)
    ntx_locked = world.holdings()[1]
    _open_job(page, refunded, "locked")
    assert page.is_disabled("#refund-escrow")
    assert "refund possible after the deadline" in page.inner_text("#escrow-hint")
    with open_session(served.engine) as session:
        deadline_ms = session.exec(
            select(JobEscrow.deadline_ms).join(Job).where(Job.job_id == refunded)  # type: ignore[arg-type]
        ).one()
    world.world.wait_until_chain_ms(deadline_ms + 2_000)
    served.clock.advance(max(0.0, (deadline_ms - served.clock().timestamp() * 1000) / 1000) + 2)
    page.wait_for_selector("#refund-escrow:not([disabled])", timeout=30_000)
    page.click("#refund-escrow")
    page.wait_for_function(
        "() => document.getElementById('notice').textContent.includes('Refund submitted')"
    )
    end = time.monotonic() + 60
    while world.holdings()[1] != ntx_locked + 1_000_000 and time.monotonic() < end:
        time.sleep(0.25)
    assert world.holdings()[1] == ntx_locked + 1_000_000
    _layout(page, shots, "job-refunded-desktop", "#job-escrow", "#balances")
    _layout(mobile, shots, "signed-in-phone", "#balances", "#post", "#jobs", "#job")

    # The OpenAPI page, served without a CDN, at both widths.
    for name, tab in (("docs-desktop", page), ("docs-phone", mobile)):
        tab.goto(root + "/docs")
        tab.wait_for_selector(".swagger-ui .opblock")
        assert tab.url == root + "/api/v1/docs"
        assert tab.locator(".swagger-ui .opblock").count() > 20
        assert "escrow/cancel/build" in tab.inner_text(".swagger-ui")
        _layout(tab, shots, name, ".swagger-ui .info", ".docs-top")

    assert not errors, json.dumps(errors)
    assert not outside, outside
    phone.close()
    desktop.close()


@pytest.mark.slow
def test_an_auction_from_the_form_to_its_winner_in_the_browser(
    browser: Any, served: Served, tmp_path: Path
) -> None:
    """A submitter posts an auction-priced job from the form; the open auctions list shows
    it; two providers bid (sealed), reveal; the job page then shows every bid, the winner
    and its second price, at desktop and phone width."""
    from proofnet.messages.auction import new_bid, sign_bid

    root, world = served.root, served.world
    shots = tmp_path / "screens"
    shots.mkdir()
    errors: list[str] = []
    outside: list[str] = []
    wallet = InjectedWallet(world)
    page = _page(_context(browser, DESKTOP, wallet), root, errors, outside)
    page.goto(root + "/")
    _sign_in(page, world.wallet.address)

    spec = job_spec()
    page.fill("#f-repo", spec["model"]["repo_url"])
    page.fill("#f-commit", spec["model"]["commit"])
    page.fill("#f-image", spec["image"])
    page.select_option("#f-pricing", "auction")
    assert page.inner_text("#price-label") == "Reserve" and page.is_visible("#f-window")
    page.fill("#f-window", "5")  # too short: refused in the form
    page.click("#post-job")
    page.wait_for_selector("#form-errors li")
    assert "bid window" in page.inner_text("#form-errors")
    page.fill("#f-window", "60")
    page.fill("#f-price", "3")
    page.click("#post-job")
    page.wait_for_selector("#job:not([hidden])")
    job_id = page.inner_text("#job-id")
    page.wait_for_selector('#job-auction [data-phase="bidding"]')

    bidders = [Worker(TestClient(served.app), clock=served.clock) for _ in range(2)]
    bids = []
    for bidder, amount in zip(bidders, (1_000_000, 2_000_000), strict=True):
        bidder.register([("NVIDIA A100 80GB", 81920)])
        bid = new_bid(job_id, bidder.public_key, amount, os.urandom(32))
        committed = bidder.request(
            "POST", f"/api/v1/worker/auctions/{job_id}/commit", {"commitment": bid.commitment}
        )
        assert committed.status_code == 200, committed.text
        bids.append(bid)
    page.reload()
    page.wait_for_selector(f'#auction-rows tr[data-auction="{job_id}"]')
    assert page.inner_text(f'#auction-rows tr[data-auction="{job_id}"] td:last-child') == "2"

    served.clock.advance(60)
    for bidder, bid in zip(bidders, bids, strict=True):
        opened = bidder.request(
            "POST",
            f"/api/v1/worker/auctions/{job_id}/reveal",
            sign_bid(bid, bidder.key).model_dump(mode="json"),
        )
        assert opened.status_code == 200, opened.text
    served.clock.advance(served.config.auction_reveal_s)

    page.click("#refresh-jobs")
    page.click(f'#job-rows tr[data-job="{job_id}"] button')
    page.wait_for_selector('#job-auction [data-phase="cleared"]')
    text = page.inner_text("#job-auction")
    assert "Won by" in text and "at 2 NTX" in text and "(winner)" in text
    assert len(page.query_selector_all("#job-auction li[data-bid]")) == 2
    _layout(page, shots, "auction-desktop", "#job-auction")
    phone = _page(_context(browser, PHONE, wallet), root, errors, outside)
    phone.goto(root + "/")
    _sign_in(phone, world.wallet.address)
    phone.click(f'#job-rows tr[data-job="{job_id}"] button')
    phone.wait_for_selector('#job-auction [data-phase="cleared"]')
    _layout(phone, shots, "auction-phone", "#job-auction")
    assert errors == [] and outside == []


def _recorded_prefix(job_dir: Path, segments: int) -> dict[str, bytes]:
    """What a provider's pot recorder leaves after `segments` of 4 segments (its prefix and
    checkpoint files), as `pot/<file>` uploads."""
    from pot.examples.numpy_mlp import MLPTrainer
    from pot.harness import run_segment
    from pot.recorder import ProofOfTraining
    from pot.schedule import Schedule
    from pot.trainer import TrainContext

    schedule = Schedule(total_steps=200, steps_per_checkpoint=50, dataset_size=512, batch_size=32)
    ctx = TrainContext(job_dir, 7, 11, schedule, {"hidden": 8})
    trainer = MLPTrainer(ctx)
    recorder = ProofOfTraining(
        job_dir / "pot", steps_per_checkpoint=schedule.steps_per_checkpoint, data_seed=11
    )
    recorder.start(trainer.state())
    for segment in range(1, segments + 1):
        run_segment(
            trainer,
            schedule.sampler(11),
            schedule.segment_steps(segment),
            lambda _s, idx, loss: recorder.record_step(idx, loss),
        )
        recorder.commit(trainer.state())
    recorder.leaves  # noqa: B018 - waits for the writes
    return {f"pot/{p.name}": p.read_bytes() for p in sorted((job_dir / "pot").iterdir())}


def _put(worker: Worker, token: str, name: str, data: bytes) -> None:
    from proofnet.messages.worker_auth import request_target, sign_request_headers

    path = f"/api/v1/worker/leases/{token}/results/{name}"
    assert worker.clock is not None
    headers = sign_request_headers(
        worker.key,
        network="devnet",
        method="PUT",
        path=request_target(path),
        body=data,
        timestamp=int(worker.clock().timestamp()),
    )
    headers["content-type"] = "application/octet-stream"
    answer = worker.client.put(path, content=data, headers=headers)
    assert answer.status_code == 200, answer.text


def test_a_resumed_jobs_attempts_and_its_destinations_in_the_browser(
    browser: Any, served: Served, tmp_path: Path
) -> None:
    """A job whose first provider is lost after 2 of 4 segments resumes on a second one: the
    job page lists each attempt (provider, outcome, the segments it proved, what it claims:
    the second only its share) and each result destination with its answer (the webhook
    waiting for the oracles' verdict, a refusal with its reason, then every one
    acknowledged), and the results withheld until the verdict, at desktop and phone width;
    the CLI's `proofnet job status` prints the same."""
    from api.client_cli import deliveries_summary, history_summary

    root, world = served.root, served.world
    shots = tmp_path / "screens"
    shots.mkdir()
    errors: list[str] = []
    outside: list[str] = []
    cli = JobClient(root, world.wallet.signing_key, http=httpx.Client(timeout=120))
    spec = job_spec()
    spec["results"] = [{"path": "out/*.json", "kind": "json"}, {"path": "pot/**", "kind": "model"}]
    spec["destinations"] = [{"kind": "api"}, {"kind": "webhook", "url": "https://hooks.example/r"}]
    spec["pricing"] = {"kind": "fixed", "amount": 4_000_000}
    spec["proof"] = {  # 4 segments, as the lost provider's recorder ran them
        "steps_per_checkpoint": 50,
        "schedule": {"steps": 200, "dataset_size": 512, "batch_size": 32},
    }
    job_id = str(cli.submit(spec)["job_id"])
    assert cli.lock(job_id)["recorded"] is True

    first, second = (Worker(TestClient(served.app), clock=served.clock) for _ in range(2))
    for w in (first, second):
        w.register([("L4", 24576)])
    lost = first.claim().json()
    for name, data in _recorded_prefix(tmp_path / "first", 2).items():
        _put(first, lost["lease_token"], name, data)
    released = first.request(
        "POST", f"/api/v1/worker/leases/{lost['lease_token']}/release", {"reason": "spot reclaim"}
    )
    assert released.status_code == 200, released.text
    claim = second.claim().json()
    assert claim["resume"]["at"] == 2, claim
    token = claim["lease_token"]
    _put(second, token, "pot/manifest.json", b"{}")
    metrics = b'{"loss": "0.25"}\n'
    _put(second, token, "out/metrics.json", metrics)
    import hashlib

    ack = {"name": "out/metrics.json", "sha256": hashlib.sha256(metrics).hexdigest(), "status": 200}
    reason = "refused: the webhook answered 503"
    # Before completion only the API's store is reported; the webhook waits for the verdict.
    reports = [{"index": 0, "kind": "api", "acknowledged": True, "results": [ack]}]
    path = f"/api/v1/worker/leases/{token}/deliveries"
    assert second.request("POST", path, {"reports": reports}).status_code == 200
    share = 4_000_000 * 2 // 4  # segments 3..4 of 4
    done = second.request(
        "POST", f"/api/v1/worker/leases/{token}/complete", {"result": {"amount": share}}
    )
    assert done.status_code == 200, done.text

    wallet = InjectedWallet(world)
    page = _page(_context(browser, DESKTOP, wallet), root, errors, outside)
    page.goto(root + "/")
    _sign_in(page, world.wallet.address)
    page.click(f'#job-rows tr[data-job="{job_id}"] button')
    page.wait_for_selector('#job-results li[data-release="withheld"]')
    assert "waiting for the oracles' verdict" in page.inner_text("#job-results")
    page.wait_for_selector('#delivery-rows tr[data-destination="1"][data-state="pending"]')
    assert "oracles' verdict" in page.inner_text("#delivery-rows")
    page.wait_for_selector('#history-rows tr[data-attempt="2"]')
    _layout(page, shots, "resumed-awaiting-verdict-desktop", "#job-history", "#job-deliveries")

    # The verdict releases; the provider delivers: first refused, then acknowledged.
    release_results(TestClient(served.app), job_id)
    after = f"/api/v1/worker/jobs/{job_id}/deliveries"
    refusal = {"index": 1, "kind": "webhook", "acknowledged": False, "reason": reason}
    assert second.request("POST", after, {"reports": [refusal]}).status_code == 200
    page.wait_for_selector('#delivery-rows tr[data-state="refused"]')
    assert reason in page.inner_text("#delivery-rows")
    assert "Not every destination" in page.inner_text("#deliveries-complete")
    page.wait_for_selector("#job-results button")
    hook = {"index": 1, "kind": "webhook", "acknowledged": True, "results": [ack]}
    assert second.request("POST", after, {"reports": [hook]}).json()["pending"] == []

    job = cli.status(job_id)
    for width, viewer in (("desktop", page), ("phone", None)):
        if viewer is None:
            viewer = _page(_context(browser, PHONE, wallet), root, errors, outside)
            viewer.goto(root + "/")
            _sign_in(viewer, world.wallet.address)
        else:
            viewer.click("#refresh-jobs")
        viewer.click(f'#job-rows tr[data-job="{job_id}"] button')
        viewer.wait_for_selector("#job-status.status-completed")
        viewer.wait_for_selector(
            '#delivery-rows tr[data-destination="1"][data-state="acknowledged"]'
        )
        rows = [
            [c.inner_text() for c in r.query_selector_all("td")]
            for r in viewer.query_selector_all("#history-rows tr")
        ]
        assert [(r[0], r[3]) for r in rows] == [("1", "1–2"), ("2", "3–end")], rows
        assert rows[0][4] == "not paid" and rows[1][4] != "—", rows
        assert "resumed attempt 1 at checkpoint 2" in rows[1][2]
        assert job["history"][1]["provider"].startswith(rows[1][1].rstrip("…"))
        assert "Every destination acknowledged" in viewer.inner_text("#deliveries-complete")
        _layout(viewer, shots, f"resumed-{width}", "#job-history", "#job-deliveries")
        # The two new tables alone, for a person to look at beside the full page.
        for part in ("history", "deliveries"):
            viewer.locator(f"#job-{part}").screenshot(path=str(shots / f"{part}-{width}.png"))

    # The CLI says the same.
    job = cli.status(job_id)
    lines = history_summary(job["history"]).splitlines()
    assert lines[0].endswith("segments 1..2, not paid")
    assert lines[1].endswith(f"segments 3..end, claims {share} NTX base units")
    assert deliveries_summary(cli.deliveries(job_id)).splitlines() == [
        "destination 0 (api): acknowledged",
        "destination 1 (webhook): acknowledged",
        "every destination acknowledged",
    ]
    assert errors == [] and outside == []


def test_storage_offers_in_the_browser(browser: Any, served: Served, tmp_path: Path) -> None:
    """Two storage providers offer space (signed offers through the API): the page lists
    them cheapest first with their endpoint, free capacity and price per GB-month, at
    desktop and phone width, before anyone signs in."""
    from proofnet.messages import storage as s

    root = served.root
    shots = tmp_path / "screens"
    shots.mkdir()
    errors: list[str] = []
    outside: list[str] = []
    providers = []
    for price, capacity in ((9_000, 4 * 10**9), (1_500, 250 * 10**9)):
        provider = Worker(TestClient(served.app), clock=served.clock)
        nonce = provider.request("POST", s.STORAGE_CHALLENGE_PATH).json()["nonce"]
        offer = s.sign_offer(
            provider.key,
            network="devnet",
            payout_address=Wallet().address,
            nonce=nonce,
            terms=s.StorageTerms(
                endpoint="https://store.example.net:9000",
                bucket="proofnet",
                capacity_bytes=capacity,
                ntx_per_gb_month=price,
            ),
        )
        put = provider.request("PUT", s.STORAGE_OFFER_PATH, offer.model_dump(mode="json"))
        assert put.status_code == 200, put.text
        providers.append(provider)
    dear, cheap = providers
    wallet = InjectedWallet(served.world)
    for width, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page = _page(_context(browser, viewport, wallet), root, errors, outside)
        page.goto(root + "/")
        page.wait_for_selector(f'#storage-rows tr[data-storage="{cheap.public_key}"]')
        rows = page.query_selector_all("#storage-rows tr")
        assert [r.get_attribute("data-storage") for r in rows] == [
            cheap.public_key,
            dear.public_key,
        ]
        cells = [c.inner_text() for c in rows[0].query_selector_all("td")]
        assert cells[1] == "store.example.net:9000"
        assert cells[2] == "250 GB of 250 GB" and cells[3] == "0.0015"
        _layout(page, shots, f"storage-{width}", "#storage-rows")
    assert errors == [] and outside == []
