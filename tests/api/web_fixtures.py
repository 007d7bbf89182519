"""A deployed protocol on a running devnet and a funded browser-wallet stand-in, for the
escrow-transaction tests and the web app's end-to-end test.

    with escrow_world(tmp_path) as world:
        world.attach(app)                  # the API uses the devnet and the deployment
        world.wallet                       # api_support.Wallet holding ADA and test NTX
        world.witness_set(tx_cbor_hex)     # what CIP-30 `signTx(tx, true)` answers
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from api_support import Wallet
from pycardano import (
    Address,
    PaymentSigningKey,
    Transaction,
    TransactionWitnessSet,
    VerificationKeyWitness,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chain" / "offchain"))

from protocol_fixtures import ProtocolWorld, protocol_world, wallet  # noqa: E402, F401

WALLET_LOVELACE = 500_000_000
WALLET_NTX = 50_000_000


def witness_set_hex(tx_cbor_hex: str, *keys: PaymentSigningKey) -> str:
    """A CIP-30 `signTx(tx, partialSign=true)` answer: the vkey witnesses of `keys`."""
    body_hash = Transaction.from_cbor(tx_cbor_hex).transaction_body.hash()
    witnesses = [VerificationKeyWitness(k.to_verification_key(), k.sign(body_hash)) for k in keys]
    return str(TransactionWitnessSet(vkey_witnesses=witnesses).to_cbor_hex())


@dataclass
class EscrowWorld:
    world: ProtocolWorld
    wallet: Wallet

    @property
    def address(self) -> Address:
        return Address.from_primitive(self.wallet.address)

    def attach(self, app: Any, confirm_wait_s: float = 30.0) -> None:
        app.state.chain_context = self.world.context
        app.state.deployment = self.world.deployment
        app.state.escrow_confirm_wait_s = confirm_wait_s

    def witness_set(self, tx_cbor_hex: str) -> str:
        return witness_set_hex(tx_cbor_hex, self.wallet.signing_key)

    def holdings(self, address: Address | None = None) -> tuple[int, int]:
        """(lovelace, NTX) at `address` (the wallet's by default), from the chain."""
        lovelace = ntx = 0
        policy = bytes.fromhex(self.world.deployment.ntx_policy)
        name = bytes.fromhex(self.world.deployment.ntx_name)
        for u in self.world.context.utxos(address or self.address):
            lovelace += u.output.amount.coin
            for pid, assets in u.output.amount.multi_asset.items():
                if pid.payload == policy:
                    for asset, qty in assets.items():
                        if asset.payload == name:
                            ntx += qty
        return lovelace, ntx

    def funded_wallet(self, lovelace: int = WALLET_LOVELACE, ntx: int = 0) -> Wallet:
        w = Wallet()
        address = Address.from_primitive(w.address)
        self.world.fund(address, lovelace)
        if ntx:
            self.world.mint_ntx(address, ntx)
        return w


@contextlib.contextmanager
def escrow_world(tmp_path: Path, *, ntx: int = WALLET_NTX) -> Iterator[EscrowWorld]:
    with protocol_world(tmp_path, oracles=2, threshold=1, providers=0) as world:
        escrow = EscrowWorld(world, Wallet())
        world.fund(escrow.address, WALLET_LOVELACE)
        world.mint_ntx(escrow.address, ntx)
        yield escrow
