"""`ChainView` over a self-hosted node (PROOFNET_CHAIN_BACKEND=ogmios with PROOFNET_KUPO_URL):
the settlement engine's reads and its submission, as `chain_view.BlockfrostChainView` gives
them on the devnet and hosted Blockfrost.

- `tip_height`: Ogmios `queryNetwork/blockHeight`.
- `tx_status`: Kupo finds the transaction's block, chain-sync reads it (height, hash:
  `chain.offchain.follow.ogmios_history`); otherwise Ogmios' mempool (`hasTransaction`).
- `spend_status`: Kupo's match of the output; its spender is `spent_at.transaction_id`
  (Kupo v2.10 and later: an older Kupo cannot say who spent an escrow, and the engine must
  know, so it is told to upgrade).
- `output_cbor`: the output of the transaction's ledger bytes, as Blockfrost's view reads it.
- `submit`: Ogmios `submitTransaction`; a ledger refusal (codes 3000-3999) is `SubmitRejected`.

Nothing is cached: a rollback is visible on the next call. Every backend failure is
`ChainUnavailable` (retry, change nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from chain.offchain.errors import ChainError
from chain.offchain.follow.kupo import Kupo
from chain.offchain.follow.ogmios_history import NotOnChain, OgmiosHistory
from chain.offchain.follow.ogmios_rpc import OgmiosError, OgmiosSession

from .ports import ChainUnavailable, OutRef, SpendStatus, SubmitRejected, TxStatus

T = TypeVar("T")
# Ogmios v6 numbers the ledger's refusals of a submitted transaction 3000-3999.
SUBMIT_REFUSED = range(3000, 4000)


class NodeChainView:
    def __init__(self, ogmios_url: str, kupo_url: str, timeout_s: float = 10.0) -> None:
        self.ogmios_url = ogmios_url
        self.timeout_s = timeout_s
        self.kupo = Kupo(kupo_url, timeout_s=timeout_s)

    def close(self) -> None:
        self.kupo.close()

    @contextmanager
    def _session(self) -> Iterator[OgmiosSession]:
        with OgmiosSession(self.ogmios_url, timeout_s=self.timeout_s) as session:
            yield session

    def _ask(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except ChainError as exc:
            raise ChainUnavailable(f"{what}: {exc}") from exc

    def tip_height(self) -> int:
        def ask() -> Any:
            with self._session() as s:
                return s.call("queryNetwork/blockHeight")

        height = self._ask("the node's tip", ask)
        if not isinstance(height, int):
            raise ChainUnavailable(f"the node reports no tip ({height!r})")
        return height

    def tx_status(self, tx_id: str) -> TxStatus:
        history = OgmiosHistory(self.ogmios_url, self.kupo, timeout_s=self.timeout_s)
        try:
            found = history.find(tx_id)
        except NotOnChain:
            return TxStatus(None, None, self._in_mempool(tx_id))
        except ChainError as exc:
            raise ChainUnavailable(f"finding {tx_id}: {exc}") from exc
        return TxStatus(found.height, found.block_id, False)

    def _in_mempool(self, tx_id: str) -> bool:
        def ask() -> bool:
            with self._session() as s:
                s.call("acquireMempool")
                try:
                    return bool(s.call("hasTransaction", {"id": tx_id}))
                finally:
                    s.call("releaseMempool")

        return self._ask(f"the mempool for {tx_id}", ask)

    def spend_status(self, ref: OutRef) -> SpendStatus:
        matches = self._ask(str(ref), lambda: self.kupo.matches(f"{ref.index}@{ref.tx_id}"))
        for match in matches:
            if match.get("transaction_id") != ref.tx_id or match.get("output_index") != ref.index:
                raise ChainUnavailable(f"Kupo answered another output when asked for {ref}")
            spent = match.get("spent_at")
            if spent is None:
                return SpendStatus(exists=True, spent_by=None)
            spender = spent.get("transaction_id") if isinstance(spent, dict) else None
            if not spender:
                raise ChainUnavailable(
                    f"Kupo says {ref} is spent but not by which transaction: the settlement "
                    "engine needs Kupo v2.10 or later (re-synced since before the deployment)"
                )
            return SpendStatus(exists=True, spent_by=str(spender))
        return SpendStatus(exists=False, spent_by=None)

    def output_cbor(self, ref: OutRef) -> bytes | None:
        from pycardano import Transaction

        history = OgmiosHistory(self.ogmios_url, self.kupo, timeout_s=self.timeout_s)
        try:
            raw = history.find(ref.tx_id).cbor
        except NotOnChain:
            return None
        except ChainError as exc:
            raise ChainUnavailable(f"reading {ref.tx_id}: {exc}") from exc
        outputs = Transaction.from_cbor(raw).transaction_body.outputs
        if ref.index >= len(outputs):
            return None
        return bytes(outputs[ref.index].to_cbor())

    def submit(self, tx_cbor: bytes) -> str:
        try:
            with self._session() as s:
                result = s.call("submitTransaction", {"transaction": {"cbor": tx_cbor.hex()}})
        except OgmiosError as exc:
            if exc.code in SUBMIT_REFUSED:
                raise SubmitRejected(f"{exc}") from exc
            raise ChainUnavailable(f"submit: {exc}") from exc
        except ChainError as exc:
            raise ChainUnavailable(f"submit: {exc}") from exc
        try:
            return str(result["transaction"]["id"])
        except (KeyError, TypeError) as exc:
            raise ChainUnavailable(f"submit: Ogmios answered {str(result)[:200]}") from exc
