"""The settlement engine's chain on a self-hosted node (`NodeChainView`: Ogmios and Kupo, the
devnet node bridge in front of a running devnet) reads what its Blockfrost view reads of the
same chain, submits through Ogmios, and reads a node that is down as "retry"."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from pycardano import Address, Network, PaymentSigningKey, TransactionBuilder, TransactionOutput
from test_intake_devnet import lock_escrow

from chain.devnet.node_bridge import node_bridge
from chain.devnet.testing import RunningDevnet
from chain.offchain.errors import BackendConfigError
from oracle.settlement.chain_view import BlockfrostChainView, chain_view_from_settings
from oracle.settlement.node_chain_view import NodeChainView
from oracle.settlement.ports import ChainUnavailable, OutRef, SubmitRejected
from proofnet.settings import Settings


def test_the_ogmios_backend_settles_through_the_node_and_needs_kupo() -> None:
    node = Settings(chain_backend="ogmios", kupo_url="http://127.0.0.1:1442")
    assert isinstance(chain_view_from_settings(node), NodeChainView)
    with pytest.raises(BackendConfigError, match="PROOFNET_KUPO_URL"):
        chain_view_from_settings(Settings(chain_backend="ogmios", kupo_url=""))


def test_a_node_that_is_down_is_a_retry() -> None:
    """Nothing listens on port 9: every read and the submission say "retry"."""
    view = NodeChainView("ws://127.0.0.1:9", "http://127.0.0.1:9", timeout_s=2.0)
    ref = OutRef("ab" * 32, 0)
    for call in (
        view.tip_height,
        lambda: view.tx_status(ref.tx_id),
        lambda: view.spend_status(ref),
        lambda: view.output_cbor(ref),
        lambda: view.submit(b"\x80"),
    ):
        with pytest.raises(ChainUnavailable):
            call()


def kupo_answering(matches: list[dict[str, Any]]) -> NodeChainView:
    view = NodeChainView("ws://127.0.0.1:9", "http://kupo.test")
    view.kupo._http = httpx.Client(
        transport=httpx.MockTransport(lambda request: httpx.Response(200, json=matches)),
        base_url="http://kupo.test",
    )
    return view


def a_match(tx_id: str, index: int, spent_at: Any) -> dict[str, Any]:
    return {"transaction_id": tx_id, "output_index": index, "spent_at": spent_at}


def test_kupo_naming_another_output_is_a_retry_not_a_spend() -> None:
    """A lying index cannot make the engine believe an escrow was spent by someone else."""
    ref = OutRef("ab" * 32, 0)
    spender = {"slot_no": 1, "header_hash": "00" * 32, "transaction_id": "cd" * 32}
    for wrong in (a_match("ef" * 32, 0, spender), a_match(ref.tx_id, 1, spender)):
        with pytest.raises(ChainUnavailable, match="another output"):
            kupo_answering([wrong]).spend_status(ref)
    found = kupo_answering([a_match(ref.tx_id, 0, spender)]).spend_status(ref)
    assert found.exists and found.spent_by == "cd" * 32


def test_a_kupo_that_cannot_name_the_spender_is_a_retry_with_the_fix() -> None:
    ref = OutRef("ab" * 32, 0)
    older = a_match(ref.tx_id, 0, {"slot_no": 1, "header_hash": "00" * 32})
    with pytest.raises(ChainUnavailable, match="Kupo v2.10"):
        kupo_answering([older]).spend_status(ref)
    assert kupo_answering([a_match(ref.tx_id, 0, None)]).spend_status(ref).spent_by is None
    assert not kupo_answering([]).spend_status(ref).exists


def wait_until_height(view: NodeChainView, tx_id: str) -> int:
    deadline = time.monotonic() + 30
    while (status := view.tx_status(tx_id)).height is None:
        assert time.monotonic() < deadline, "the submitted transaction was never included"
        time.sleep(0.1)
    return status.height


@pytest.mark.slow
def test_node_and_blockfrost_views_agree_and_the_node_submits(devnet: RunningDevnet) -> None:
    policy = devnet.admin_status()["faucet_policy_id"]
    skey = PaymentSigningKey.generate()
    escrow = lock_escrow(devnet, skey, "ab" * 32, policy)
    lock = devnet.chain_context().api.transaction_utxos(escrow.tx_id, return_type="json")
    funded = next(i for i in lock["inputs"] if not i.get("collateral"))
    spent = OutRef(funded["tx_hash"], int(funded["output_index"]))
    unspent = OutRef(escrow.tx_id, escrow.index)
    missing = [OutRef(escrow.tx_id, 9), OutRef("ef" * 32, 0)]
    blockfrost = BlockfrostChainView(devnet.url)
    with node_bridge(devnet.url) as bridge:
        node = NodeChainView(bridge.ogmios_url, bridge.kupo_url)
        before = blockfrost.tip_height()
        assert before <= node.tip_height() <= blockfrost.tip_height()
        for tx_id in (escrow.tx_id, spent.tx_id, "ef" * 32):
            assert node.tx_status(tx_id) == blockfrost.tx_status(tx_id), tx_id
        for ref in (spent, unspent, *missing):
            assert node.spend_status(ref) == blockfrost.spend_status(ref), ref
            assert node.output_cbor(ref) == blockfrost.output_cbor(ref), ref
        assert node.spend_status(spent).spent_by == escrow.tx_id
        assert node.spend_status(unspent).spent_by is None

        # A payment submitted through Ogmios is included; the same again is refused.
        context = devnet.chain_context()
        address = Address(skey.to_verification_key().hash(), network=Network.TESTNET)
        builder = TransactionBuilder(context)
        builder.add_input_address(address)
        builder.add_output(TransactionOutput(address, 2_000_000))
        tx = builder.build_and_sign([skey], change_address=address)
        assert node.submit(tx.to_cbor()) == str(tx.id)
        height = wait_until_height(node, str(tx.id))
        assert blockfrost.tx_status(str(tx.id)).height == height
        with pytest.raises(SubmitRejected):
            node.submit(tx.to_cbor())
