"""On a running devnet, the oracle's escrow checks read the same facts through a self-hosted
node's Kupo (the devnet node bridge, real Kupo v2.10 protocol) as through the devnet's
Blockfrost REST: an escrow unspent, an output spent (and by which transaction), missing
outputs, a datum that is not an escrow's, an output at another address."""

from __future__ import annotations

import pytest
from pycardano import (
    Address,
    Network,
    PaymentSigningKey,
    ScriptHash,
    TransactionBuilder,
    TransactionOutput,
)
from test_intake_devnet import lock_escrow

from chain.devnet.node_bridge import node_bridge
from chain.devnet.testing import RunningDevnet
from chain.offchain.backends import NodeChainContext
from chain.offchain.follow.kupo import Kupo
from oracle.inputs.chain import BlockfrostChainView, KupoChainView, chain_view_for
from oracle.service import escrow_script_hash
from proofnet.messages.attestation import EscrowRef

pytestmark = pytest.mark.slow  # a devnet and a node bridge


def pay_to_escrow_with_a_foreign_datum(devnet: RunningDevnet, skey: PaymentSigningKey) -> str:
    """An output at the escrow script whose inline datum is an integer, not an EscrowDatum."""
    context = devnet.chain_context()
    address = Address(skey.to_verification_key().hash(), network=Network.TESTNET)
    devnet.wait_for_tx(devnet.fund(str(address), lovelace=10_000_000))
    escrow = Address(ScriptHash(bytes.fromhex(escrow_script_hash())), network=Network.TESTNET)
    builder = TransactionBuilder(context)
    builder.add_input_address(address)
    builder.add_output(TransactionOutput(escrow, 2_000_000, datum=42))
    tx = builder.build_and_sign([skey], change_address=address)
    context.submit_tx(tx)
    devnet.wait_for_tx(str(tx.id))
    return str(tx.id)


def test_kupo_and_blockfrost_read_the_same_escrow_facts(devnet: RunningDevnet) -> None:
    policy = devnet.admin_status()["faucet_policy_id"]
    skey = PaymentSigningKey.generate()
    escrow = lock_escrow(devnet, skey, "ab" * 32, policy)
    foreign = pay_to_escrow_with_a_foreign_datum(devnet, skey)
    # The lock spent the faucet's payment to the submitter: that output is spent by the lock.
    lock_inputs = devnet.chain_context().api.transaction_utxos(escrow.tx_id, return_type="json")
    funded = next(i for i in lock_inputs["inputs"] if not i.get("collateral"))
    spent = EscrowRef(tx_id=funded["tx_hash"], index=int(funded["output_index"]))
    cases = {
        "unspent escrow": escrow,
        "change at the submitter's address": EscrowRef(tx_id=escrow.tx_id, index=1),
        "spent": spent,
        "foreign datum": EscrowRef(tx_id=foreign, index=0),
        "missing index": EscrowRef(tx_id=escrow.tx_id, index=9),
        "missing transaction": EscrowRef(tx_id="ef" * 32, index=0),
    }
    blockfrost = chain_view_for(devnet.chain_context(), ttl_s=0.0)
    assert isinstance(blockfrost, BlockfrostChainView)
    with node_bridge(devnet.url) as node:
        context = NodeChainContext(node.ogmios_url, node.kupo_url, Network.TESTNET)
        kupo = chain_view_for(context, ttl_s=0.0)
        assert isinstance(kupo, KupoChainView)
        for name, ref in cases.items():
            assert kupo.escrow_output(ref) == blockfrost.escrow_output(ref), name
        found = {name: kupo.escrow_output(ref) for name, ref in cases.items()}
    assert found["unspent escrow"].status == "unspent"
    escrow_out = found["unspent escrow"].output
    assert escrow_out is not None and escrow_out.datum is not None
    assert found["spent"].status == "spent" and found["spent"].spent_by == escrow.tx_id
    change = found["change at the submitter's address"].output
    assert change is not None and change.payment_script_hash is None
    foreign_out = found["foreign datum"].output
    assert foreign_out is not None and foreign_out.datum is None
    assert "not an EscrowDatum" in foreign_out.datum_error
    assert found["missing index"].status == found["missing transaction"].status == "missing"


def test_kupo_address_patterns_give_the_devnets_utxos(devnet: RunningDevnet) -> None:
    """What pycardano's Kupo extension asks (`/matches/{address}?unspent`) for a role's
    current UTxOs (the API's balances, escrows at the script) reads as the devnet's own."""
    policy = devnet.admin_status()["faucet_policy_id"]
    skey = PaymentSigningKey.generate()
    escrow = lock_escrow(devnet, skey, "ab" * 32, policy)
    submitter = Address(skey.to_verification_key().hash(), network=Network.TESTNET)
    script = Address(ScriptHash(bytes.fromhex(escrow_script_hash())), network=Network.TESTNET)
    rest = devnet.chain_context()
    with node_bridge(devnet.url) as node:
        context = NodeChainContext(node.ogmios_url, node.kupo_url, Network.TESTNET)
        for address in (str(submitter), str(script)):
            by_kupo = {str(u.input): u.output.amount for u in context.utxos(address)}
            assert by_kupo == {str(u.input): u.output.amount for u in rest.utxos(address)}
        at_script = {
            (str(u.input.transaction_id), u.input.index): u for u in context.utxos(str(script))
        }
        locked = at_script[(escrow.tx_id, escrow.index)].output
        assert locked.datum is not None
        spent = Kupo(node.kupo_url).matches(f"{submitter}?spent")
    assert [m["spent_at"]["transaction_id"] for m in spent] == [escrow.tx_id]
