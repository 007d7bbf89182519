"""The oracle's view of escrow outputs on chain, through the pycardano `ChainContext` that
`chain.offchain.backends.chain_context(settings)` builds: `BlockfrostChainView` on the devnet
and hosted Blockfrost (`/txs/{hash}/utxos`), `KupoChainView` on a self-hosted node
(PROOFNET_CHAIN_BACKEND=ogmios with PROOFNET_KUPO_URL: `/matches/*@{tx id}`, read and checked
by `chain.offchain.output_reads`). Both give the same `EscrowLookup`s for the same chain.

Lookups are cached for a short time, in a cache of bounded size (`cache_size`
transactions: made-up ids asked of the public escrow look-up evict, never grow it), and can
be prefetched per batch (`prefetch`), so verifying many attestations costs one backend call
per escrow transaction, not one per check. A cached "unspent" answer can be stale by up to `ttl_s`; that is harmless because the
settlement transaction itself spends the escrow, and the settlement engine handles an
escrow spent in the meantime.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from cachetools import TTLCache

from chain.contracts.types import EscrowDatum
from chain.offchain.backends import NodeChainContext
from chain.offchain.errors import BackendConfigError, ChainError
from chain.offchain.escrow_terms import UNKNOWN_SPENDER, EscrowFacts, facts_from_blockfrost
from chain.offchain.follow.kupo import Kupo
from chain.offchain.output_reads import NEEDS_KUPO, kupo_outputs
from proofnet.messages.attestation import EscrowRef

LookupStatus = Literal["unspent", "spent", "missing"]


class ChainUnavailable(ChainError):
    """The chain backend did not answer; verification is retried later."""


@dataclass(frozen=True)
class EscrowOutput:
    ref: EscrowRef
    address: str
    payment_script_hash: str | None  # hex, None for a key-hash payment credential
    lovelace: int
    assets: Mapping[str, int]  # unit (policy hex + name hex) -> quantity
    datum: EscrowDatum | None
    datum_error: str  # why `datum` is None ("" when it parsed)

    def quantity(self, policy_hex: str, name_hex: str) -> int:
        return self.assets.get(policy_hex + name_hex, 0)

    def facts(self, spent_by: str | None = None) -> EscrowFacts:
        """This output as `chain.offchain.escrow_terms` checks it."""
        return EscrowFacts(
            ref=f"{self.ref.tx_id}#{self.ref.index}",
            address=self.address,
            payment_script_hash=self.payment_script_hash,
            lovelace=self.lovelace,
            assets=self.assets,
            datum=self.datum,
            datum_error=self.datum_error,
            spent_by=spent_by,
        )


@dataclass(frozen=True)
class EscrowLookup:
    status: LookupStatus
    output: EscrowOutput | None = None
    spent_by: str | None = None


class ChainView(Protocol):
    def escrow_output(self, ref: EscrowRef) -> EscrowLookup:
        """Raises ChainUnavailable when the backend cannot be asked."""
        ...


def output_from_blockfrost(ref: EscrowRef, out: Mapping[str, Any]) -> EscrowOutput:
    """An `EscrowOutput` from one Blockfrost `/txs/{hash}/utxos` output object."""
    return output_from_facts(ref, facts_from_blockfrost(f"{ref.tx_id}#{ref.index}", out))


def output_from_facts(ref: EscrowRef, facts: EscrowFacts) -> EscrowOutput:
    return EscrowOutput(
        ref=ref,
        address=facts.address,
        payment_script_hash=facts.payment_script_hash,
        lovelace=facts.lovelace,
        assets=facts.assets,
        datum=facts.datum,
        datum_error=facts.datum_error,
    )


@dataclass
class _Entry:
    at: float
    lookups: dict[int, EscrowLookup]  # output index -> lookup; absent index -> missing


class _TxCache:
    """The lookups of one backend call per transaction, cached for `ttl_s` in a cache of
    `cache_size` transactions; a subclass says how one transaction is fetched."""

    ttl_s: float
    cache_size: int
    _cache: TTLCache[str, _Entry]
    _lock: threading.Lock

    def __post_init__(self) -> None:
        self._cache = TTLCache(maxsize=self.cache_size, ttl=self.ttl_s, timer=time.monotonic)

    def _fetch(self, tx_id: str) -> _Entry:
        raise NotImplementedError

    def prefetch(self, refs: Iterable[EscrowRef]) -> None:
        """Refresh the cache for these escrows' transactions (one call per transaction)."""
        for tx_id in sorted({r.tx_id for r in refs}):
            entry = self._fetch(tx_id)
            with self._lock:
                self._cache[tx_id] = entry

    def escrow_output(self, ref: EscrowRef) -> EscrowLookup:
        with self._lock:
            entry = self._cache.get(ref.tx_id)
        if entry is None:
            entry = self._fetch(ref.tx_id)
            with self._lock:
                self._cache[ref.tx_id] = entry
        return entry.lookups.get(ref.index, EscrowLookup(status="missing"))


@dataclass
class BlockfrostChainView(_TxCache):
    """Looks escrow outputs up by transaction (`/txs/{hash}/utxos`): tells unspent from spent
    from missing, and sees escrows at any staking part of the escrow script."""

    context: Any  # a pycardano BlockFrostChainContext (anything with `.api.transaction_utxos`)
    ttl_s: float = 10.0
    on_error: Callable[[str], None] | None = None
    cache_size: int = 10_000
    _cache: TTLCache[str, _Entry] = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _fetch(self, tx_id: str) -> _Entry:
        try:
            body = self.context.api.transaction_utxos(hash=tx_id, return_type="json")
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if status == 404:
                return _Entry(time.monotonic(), {})
            if self.on_error is not None:
                self.on_error("transaction_utxos")
            raise ChainUnavailable(f"chain backend failed looking up {tx_id}: {exc}") from exc
        lookups: dict[int, EscrowLookup] = {}
        for out in body.get("outputs", []):
            index = int(out["output_index"])
            ref = EscrowRef(tx_id=tx_id, index=index)
            spent_by = out.get("consumed_by_tx")
            lookups[index] = EscrowLookup(
                status="spent" if spent_by else "unspent",
                output=output_from_blockfrost(ref, out),
                spent_by=spent_by,
            )
        return _Entry(time.monotonic(), lookups)


@dataclass
class KupoChainView(_TxCache):
    """Looks escrow outputs up by transaction through Kupo (`/matches/*@{tx id}`, one call per
    transaction, inline datums by hash): the same lookups, cache and prefetch as
    `BlockfrostChainView`. Kupo down, or an answer that is not to be believed (another
    output than asked, a datum not matching its hash), is `ChainUnavailable`: retried,
    never a verdict against the provider."""

    kupo: Kupo
    ttl_s: float = 10.0
    on_error: Callable[[str], None] | None = None
    cache_size: int = 10_000
    _cache: TTLCache[str, _Entry] = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _fetch(self, tx_id: str) -> _Entry:
        try:
            outputs = kupo_outputs(self.kupo, tx_id)
        except ChainError as exc:
            if self.on_error is not None:
                self.on_error("kupo_matches")
            raise ChainUnavailable(f"Kupo failed looking up {tx_id}: {exc}") from exc
        lookups: dict[int, EscrowLookup] = {}
        for index, facts in outputs.items():
            ref = EscrowRef(tx_id=tx_id, index=index)
            spent_by = facts.spent_by if facts.spent_by != UNKNOWN_SPENDER else None
            lookups[index] = EscrowLookup(
                status="spent" if facts.spent_by else "unspent",
                output=output_from_facts(ref, facts),
                spent_by=spent_by,
            )
        return _Entry(time.monotonic(), lookups)


@dataclass
class StaticChainView:
    """A chain view over known outputs: what a prefetch leaves behind, and what tests and
    the benchmark use to take the backend's latency out of the measurement."""

    lookups: dict[tuple[str, int], EscrowLookup] = field(default_factory=dict)

    def put(self, lookup: EscrowLookup, ref: EscrowRef) -> None:
        self.lookups[(ref.tx_id, ref.index)] = lookup

    def escrow_output(self, ref: EscrowRef) -> EscrowLookup:
        return self.lookups.get((ref.tx_id, ref.index), EscrowLookup(status="missing"))


# The oracle asks Kupo with a shorter patience than a follower: a verification waiting on a
# slow index is postponed and retried, not held.
KUPO_TIMEOUT_S = 10.0


def chain_view_for(context: Any, **kwargs: Any) -> BlockfrostChainView | KupoChainView:
    """The chain view for a backend context: Blockfrost-shaped backends (hosted Blockfrost,
    the devnet) by transaction, a self-hosted node through its Kupo. Ogmios without Kupo
    cannot tell a spent escrow from a missing one: refused with what to set."""
    if hasattr(getattr(context, "api", None), "transaction_utxos"):
        return BlockfrostChainView(context, **kwargs)
    if isinstance(context, NodeChainContext):
        return KupoChainView(Kupo(context.kupo_url, timeout_s=KUPO_TIMEOUT_S), **kwargs)
    if type(context).__name__ == "OgmiosV6ChainContext":
        raise BackendConfigError(f"the oracle cannot verify escrows: {NEEDS_KUPO}")
    raise BackendConfigError(
        f"{type(context).__name__} cannot look up outputs by transaction; the oracle needs "
        "PROOFNET_CHAIN_BACKEND=devnet, blockfrost, or ogmios with PROOFNET_KUPO_URL"
    )
