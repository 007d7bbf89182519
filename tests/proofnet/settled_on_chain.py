"""What a demo's settlement did on chain, read from its ledger directory."""

from __future__ import annotations

from pathlib import Path

from pycardano import ScriptHash, Transaction, TransactionOutput

from chain.contracts.types import EscrowDatum
from chain.devnet.ledger import Ledger
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.onchain import datum_cbor


def ntx(output: TransactionOutput, deployment: Deployment) -> int:
    policy, name = bytes.fromhex(deployment.ntx_policy), bytes.fromhex(deployment.ntx_name)
    return sum(
        int(q)
        for p, assets in output.amount.multi_asset.items()
        if p.payload == policy
        for n, q in assets.items()
        if n.payload == name
    )


def settled_escrow(data: Path, tx_hash: str) -> tuple[EscrowDatum, int, dict[str, int]]:
    """From the ledger directory: the spent escrow's datum and NTX, and the NTX the
    settlement gives each address."""
    deployment = Deployment.load(data / "deployment.json")
    ledger = Ledger.open(data / "devnet")
    try:
        record = ledger.transaction(tx_hash)
        assert record is not None and record.valid_contract
        tx = Transaction.from_cbor(record.cbor)
        escrows = []
        for tx_in in tx.transaction_body.inputs:
            source = ledger.transaction(tx_in.transaction_id.payload.hex())
            assert source is not None
            spent = Transaction.from_cbor(source.cbor).transaction_body.outputs[tx_in.index]
            if spent.address.payment_part == ScriptHash(bytes.fromhex(deployment.escrow_hash)):
                escrows.append(spent)
    finally:
        ledger.close()
    ((escrow),) = escrows
    received: dict[str, int] = {}
    for output in tx.transaction_body.outputs:
        address = str(output.address)
        received[address] = received.get(address, 0) + ntx(output, deployment)
    datum = EscrowDatum.from_cbor(datum_cbor(escrow.datum))
    return datum, ntx(escrow, deployment), received
