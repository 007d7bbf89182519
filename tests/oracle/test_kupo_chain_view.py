"""The oracle's escrow checks on a self-hosted node (`oracle.inputs.chain.KupoChainView`): the
same facts as through Blockfrost for the same outputs, and an index that lies or is down is
a retry, never a verdict against the provider.

Kupo here is the devnet node bridge's Kupo app (`chain.devnet.node_bridge.kupo_app`, real
Kupo v2.10 shapes) over the same Blockfrost-shaped outputs the Blockfrost view reads; the
lying index is a transport that rewrites its answers.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from escrow_chain import FakeChainContext, deployment, escrow_datum, escrow_output
from fastapi.testclient import TestClient
from oracle_fixtures import World, make_world
from pycardano import Address, Network, VerificationKeyHash

from chain.devnet.node_bridge import kupo_app
from chain.offchain.backends import NodeChainContext, ogmios_context
from chain.offchain.errors import BackendConfigError
from chain.offchain.follow.kupo import Kupo
from oracle.inputs.chain import (
    BlockfrostChainView,
    ChainUnavailable,
    KupoChainView,
    chain_view_for,
)
from oracle.verification.verify import verify
from proofnet.messages.attestation import EscrowRef

SUBMITTER = "aa" * 28
JOB = "cd" * 32
KEY_ADDRESS = str(Address(VerificationKeyHash(bytes(28)), network=Network.TESTNET))


class FakeRest:
    """The devnet REST reads the Kupo bridge makes, over a `FakeChainContext`'s outputs."""

    def __init__(self, chain: FakeChainContext) -> None:
        self.chain = chain

    def get(self, path: str) -> Any:
        parts = path.strip("/").split("/")
        txs = self.chain.api.txs
        if parts[0] == "txs" and parts[1] in txs:
            if len(parts) == 2:
                return {"slot": 10, "block": "bb" * 32, "index": 0, "valid_contract": True}
            if parts[2] == "utxos":
                return txs[parts[1]]
        if (
            parts[0] == "txs"
            and len(parts) == 2
            and any(
                o.get("consumed_by_tx") == parts[1] for tx in txs.values() for o in tx["outputs"]
            )
        ):
            return {"slot": 11, "block": "cc" * 32, "index": 0, "valid_contract": True}
        return None


class World2:
    """Outputs on a fake chain, read both ways."""

    def __init__(self) -> None:
        self.chain = FakeChainContext()
        self.deployed = deployment()
        self.kupo = Kupo("http://kupo.test")
        self.kupo._http = TestClient(kupo_app(FakeRest(self.chain)), base_url="http://kupo.test")

    def put(self, output: dict[str, Any]) -> EscrowRef:
        tx_id, index = self.chain.put(output)
        return EscrowRef(tx_id=tx_id, index=index)

    def honest(self, **changes: Any) -> dict[str, Any]:
        """The escrow output as Blockfrost shows it (with the hash of its inline datum)."""
        datum = escrow_datum(self.deployed, JOB, SUBMITTER, budget=5_000, deadline_ms=10**13)
        output = {**escrow_output(self.deployed, datum), **changes}
        inline = output.get("inline_datum")
        output["data_hash"] = (
            hashlib.blake2b(bytes.fromhex(inline), digest_size=32).hexdigest() if inline else None
        )
        return output

    def blockfrost(self) -> BlockfrostChainView:
        return BlockfrostChainView(self.chain, ttl_s=0.0)

    def via_kupo(self, **kwargs: Any) -> KupoChainView:
        return KupoChainView(self.kupo, **{"ttl_s": 0.0, **kwargs})


@pytest.fixture
def w() -> World2:
    return World2()


def test_kupo_reads_an_unspent_escrow_as_blockfrost_does(w: World2) -> None:
    ref = w.put(w.honest())
    found = w.via_kupo().escrow_output(ref)
    assert found.status == "unspent" and found.output is not None
    assert found.output.datum is not None and found.output.datum.job_id.hex() == JOB
    assert found == w.blockfrost().escrow_output(ref)


def test_kupo_reads_a_spent_escrow_and_its_spender_as_blockfrost_does(w: World2) -> None:
    spender = secrets.token_hex(32)
    ref = w.put(w.honest(consumed_by_tx=spender))
    found = w.via_kupo().escrow_output(ref)
    assert found.status == "spent" and found.spent_by == spender
    assert found == w.blockfrost().escrow_output(ref)
    assert found.output is not None and found.output.facts(found.spent_by).spent_by == spender


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"inline_datum": "d87980"}, id="a datum that is not an EscrowDatum"),
        pytest.param({"inline_datum": None}, id="no datum"),
        pytest.param({"address": KEY_ADDRESS}, id="an output at another address"),
    ],
)
def test_kupo_gives_the_same_facts_for_an_output_that_cannot_pay(
    w: World2, changes: dict[str, Any]
) -> None:
    ref = w.put(w.honest(**changes))
    found = w.via_kupo().escrow_output(ref)
    assert found == w.blockfrost().escrow_output(ref)
    assert found.output is not None
    if "address" in changes:
        assert found.output.payment_script_hash is None
    else:
        assert found.output.datum is None and found.output.datum_error


def test_missing_outputs_read_missing_both_ways(w: World2) -> None:
    ref = w.put(w.honest())
    for asked in (EscrowRef(tx_id=ref.tx_id, index=3), EscrowRef(tx_id="ef" * 32, index=0)):
        assert w.via_kupo().escrow_output(asked).status == "missing"
        assert w.blockfrost().escrow_output(asked).status == "missing"


def test_one_kupo_call_per_transaction_prefetched_and_cached(w: World2) -> None:
    refs = [w.put(w.honest()) for _ in range(3)]
    calls: list[str] = []
    app = TestClient(kupo_app(FakeRest(w.chain)), base_url="http://kupo.test")
    original = app.get

    def counted(url: Any, **kwargs: Any) -> httpx.Response:
        calls.append(str(url))
        return original(url, **kwargs)

    app.get = counted  # type: ignore[method-assign]
    w.kupo._http = app
    view = w.via_kupo(ttl_s=60.0)
    view.prefetch([*refs, refs[0]])
    assert len([c for c in calls if c.startswith("/matches/")]) == 3
    calls.clear()
    assert all(view.escrow_output(r).status == "unspent" for r in refs)
    assert calls == []


# --- an index that lies, or is down -----------------------------------------------------


def rewriting(w: World2, rewrite: Callable[[str, Any], Any]) -> None:
    """Kupo's answers go through `rewrite(path, json)` before the oracle sees them."""
    honest = TestClient(kupo_app(FakeRest(w.chain)), base_url="http://kupo.test")

    def handler(request: httpx.Request) -> httpx.Response:
        answer = honest.get(request.url.path)
        body = json.dumps(rewrite(request.url.path, answer.json())).encode()
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    w.kupo._http = httpx.Client(transport=httpx.MockTransport(handler), base_url="http://kupo.test")


def test_an_answer_about_another_transaction_is_refused(w: World2) -> None:
    ref = w.put(w.honest())
    other = w.put(w.honest())

    def swap(path: str, body: Any) -> Any:
        if path.startswith("/matches/"):
            return json.loads(json.dumps(body).replace(ref.tx_id, other.tx_id))
        return body

    rewriting(w, swap)
    errors: list[str] = []
    with pytest.raises(ChainUnavailable, match="when asked for"):
        w.via_kupo(on_error=errors.append).escrow_output(ref)
    assert errors == ["kupo_matches"]


def test_an_output_answered_twice_is_refused(w: World2) -> None:
    ref = w.put(w.honest())
    rewriting(w, lambda path, body: body * 2 if path.startswith("/matches/") else body)
    with pytest.raises(ChainUnavailable, match="twice"):
        w.via_kupo().escrow_output(ref)


def test_a_datum_that_does_not_hash_to_its_hash_is_refused(w: World2) -> None:
    """A lying index cannot hand the oracle another job's escrow terms for this output."""
    ref = w.put(w.honest())
    forged = escrow_datum(w.deployed, "ee" * 32, SUBMITTER, budget=10**9, deadline_ms=10**13)

    def forge(path: str, body: Any) -> Any:
        return {"datum": forged.to_cbor_hex()} if path.startswith("/datums/") else body

    rewriting(w, forge)
    with pytest.raises(ChainUnavailable, match="does not hash"):
        w.via_kupo().escrow_output(ref)


def test_an_inline_datum_kupo_cannot_serve_is_a_retry(w: World2) -> None:
    ref = w.put(w.honest())
    rewriting(w, lambda path, body: None if path.startswith("/datums/") else body)
    with pytest.raises(ChainUnavailable, match="cannot serve"):
        w.via_kupo().escrow_output(ref)


def test_kupo_down_is_a_retry_never_a_verdict(world: World) -> None:
    """Nothing listens on port 9 of localhost: the verification is retried later."""
    errors: list[str] = []
    view = KupoChainView(Kupo("http://127.0.0.1:9", timeout_s=2.0), on_error=errors.append)
    with pytest.raises(ChainUnavailable, match="unreachable"):
        view.escrow_output(world.escrow)
    result = verify(world.sign(), world.context(chain=view))
    assert result.outcome == "retry" and result.reason is None
    assert errors == ["kupo_matches", "kupo_matches"]


def test_kupo_answering_500_is_a_retry(w: World2) -> None:
    ref = w.put(w.honest())
    w.kupo._http = httpx.Client(
        transport=httpx.MockTransport(lambda request: httpx.Response(503, text="syncing")),
        base_url="http://kupo.test",
    )
    with pytest.raises(ChainUnavailable, match="503"):
        w.via_kupo().escrow_output(ref)


# --- which view a backend gets ------------------------------------------------------------


def test_the_ogmios_backend_with_kupo_gets_the_kupo_view() -> None:
    context = NodeChainContext("ws://127.0.0.1:1337", "http://127.0.0.1:1442", Network.TESTNET)
    view = chain_view_for(context, ttl_s=5.0)
    assert isinstance(view, KupoChainView) and view.kupo.url == "http://127.0.0.1:1442"
    assert isinstance(chain_view_for(FakeChainContext()), BlockfrostChainView)


def test_ogmios_without_kupo_is_refused_with_the_setting_to_set() -> None:
    with pytest.raises(BackendConfigError, match="PROOFNET_KUPO_URL"):
        chain_view_for(ogmios_context("ws://127.0.0.1:1337", Network.TESTNET))


@pytest.fixture
def world() -> World:
    return make_world()
