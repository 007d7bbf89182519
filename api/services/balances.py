"""Balances and payouts per address or stake address, split by where the money is.

- available: ADA and NTX in UTxOs at the address(es), read through the chain backend;
- in escrow: budgets of this submitter's recorded job escrows whose UTxO is still unspent;
- earned, refunded, slashed: what this deployment's scripts paid to (or, for slashes, took
  from) these addresses, from the earnings record the chain watcher keeps
  (api.services.chain_watch, api.services.movements), with the latest payouts and refunds,
  their transactions, blocks and confirmations;
- pending settlement: amounts of this provider's attestations the oracle has verified,
  batched or settled whose escrow the record does not show spent yet, read from the
  oracle's public status endpoint; unknown, and said so, when the oracle cannot be asked.

Chain and oracle lookups go through `CachedLookups`, which keeps answers (failures too) for a
short TTL (10 s), so a balance costs a few indexed queries and at most one remote call per
address per TTL, however often it is polled. The assembled balance is itself kept per (user,
address) in `BalanceCache` for `BALANCE_CACHE_TTL_S` (5 s, never longer than the lookups'
TTL), so a polled balance costs no query at all most of the time: figures read from the
database (earned, payouts, recorded escrows, completed jobs) show up to 5 s late, except
that a movement the watcher records clears the caches at once (in this process directly,
in others through the change feed).
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from cachetools import TTLCache
from pycardano import Address
from sqlalchemy import Connection, Integer, bindparam, exists
from sqlmodel import Session, col, select

from api.errors import BadRequest, Forbidden
from api.models import ChainMovement, Job, JobEscrow, Lease, Provider, User
from api.services import movements
from chain.offchain.explorers import explorer_links
from chain.offchain.output_reads import output_facts
from proofnet.redaction import redact_credentials

# Attestation statuses whose amount is still to come while the record shows the escrow
# unspent ("settled": the oracle saw its settlement; the watcher has not recorded it yet).
PENDING_STATUSES = ("verified", "batched", "settled")
MAX_PAYOUTS = 50
# Bounds on remote calls per balance read (each cached): escrows checked, jobs asked about.
MAX_ESCROW_CHECKS = 100
MAX_PENDING_JOBS = 20


class LookupFailed(Exception):
    """A chain or oracle lookup failed; the message says which and why. It is shown to
    users (a balance's note), so the credentials of any URL in it are redacted."""

    def __init__(self, message: str) -> None:
        super().__init__(redact_credentials(message))


@dataclass(frozen=True)
class Holdings:
    lovelace: int
    # None when no NTX unit is configured.
    ntx: int | None


class ChainReader(Protocol):
    def holdings(self, address: str) -> Holdings: ...

    def output_unspent(self, tx_id: str, index: int) -> bool: ...


class OracleReader(Protocol):
    def job_attestations(self, job_id: str) -> list[dict[str, Any]]: ...


class ContextChainReader:
    """Reads through a pycardano ChainContext (built on first use, from settings)."""

    def __init__(self, make_context: Callable[[], Any], ntx_unit: str | None) -> None:
        self._make_context = make_context
        self._context: Any = None
        self._lock = threading.Lock()
        self.ntx_unit = ntx_unit

    def _ctx(self) -> Any:
        with self._lock:
            if self._context is None:
                try:
                    self._context = self._make_context()
                except Exception as e:  # e.g. the backend is down when first asked
                    raise LookupFailed(f"chain backend: {type(e).__name__}: {e}") from e
            return self._context

    def holdings(self, address: str) -> Holdings:
        try:
            utxos = self._ctx().utxos(address)
        except Exception as e:  # any backend failure reads as "unknown", never a 500
            raise LookupFailed(f"chain backend: {type(e).__name__}: {e}") from e
        lovelace = 0
        ntx = 0
        for utxo in utxos:
            value = utxo.output.amount
            lovelace += value.coin
            if self.ntx_unit is not None:
                policy_hex, name_hex = self.ntx_unit[:56], self.ntx_unit[56:]
                for policy, assets in value.multi_asset.items():
                    if policy.payload.hex() != policy_hex:
                        continue
                    for name, quantity in assets.items():
                        if name.payload.hex() == name_hex:
                            ntx += quantity
        return Holdings(lovelace, ntx if self.ntx_unit is not None else None)

    def output_unspent(self, tx_id: str, index: int) -> bool:
        try:
            found = output_facts(self._ctx(), tx_id, index)
        except Exception as e:  # Kupo not configured, a backend down or answering nonsense
            raise LookupFailed(f"chain backend: {type(e).__name__}: {e}") from e
        return found is not None and found.spent_by is None


class HttpOracleReader:
    def __init__(self, oracle_url: str, timeout_s: float = 3.0) -> None:
        self.base = oracle_url.rstrip("/")
        self.timeout_s = timeout_s

    def job_attestations(self, job_id: str) -> list[dict[str, Any]]:
        try:
            response = httpx.get(
                f"{self.base}/api/v1/jobs/{job_id}/attestations", timeout=self.timeout_s
            )
            response.raise_for_status()
            data = response.json().get("data")
        except (httpx.HTTPError, ValueError, AttributeError) as e:
            raise LookupFailed(f"oracle at {self.base}: {type(e).__name__}: {e}") from e
        if not isinstance(data, list):
            raise LookupFailed(f"oracle at {self.base}: unexpected response shape")
        return [a for a in data if isinstance(a, dict)]


class CachedLookups:
    """TTL cache in front of the chain and the oracle; failures are cached too, so a dead
    backend costs one timeout per TTL, not one per request."""

    def __init__(
        self,
        chain: ChainReader,
        oracle: OracleReader | None,
        *,
        ttl_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = 100_000,
    ) -> None:
        self.chain = chain
        self.oracle = oracle
        self.ttl_s = ttl_s
        self.clock = clock
        self.max_entries = max_entries
        # (answer, failure) per lookup; the oldest go first when full.
        self._cache: TTLCache[tuple[str, ...], tuple[Any, str | None]] = TTLCache(
            maxsize=max_entries, ttl=ttl_s, timer=clock
        )
        self._lock = threading.Lock()

    def _get(self, key: tuple[str, ...], fetch: Callable[[], Any]) -> Any:
        with self._lock:
            hit = self._cache.get(key)
        if hit is None:
            try:
                hit = (fetch(), None)
            except LookupFailed as e:
                hit = (None, str(e))
            with self._lock:
                self._cache[key] = hit
        if hit[1] is not None:
            raise LookupFailed(hit[1])
        return hit[0]

    def holdings(self, address: str) -> Holdings:
        result: Holdings = self._get(("h", address), lambda: self.chain.holdings(address))
        return result

    def output_unspent(self, tx_id: str, index: int) -> bool:
        return bool(
            self._get(("o", tx_id, str(index)), lambda: self.chain.output_unspent(tx_id, index))
        )

    def job_attestations(self, job_id: str) -> list[dict[str, Any]]:
        oracle = self.oracle
        if oracle is None:
            raise LookupFailed("no oracle status endpoint is configured")
        result: list[dict[str, Any]] = self._get(
            ("a", job_id), lambda: oracle.job_attestations(job_id)
        )
        return result


# How long an assembled balance is served again to the same user for the same address.
BALANCE_CACHE_TTL_S = 5.0


class BalanceCache:
    """Assembled balances per (user id, address as asked), for `ttl_s` seconds; thread-safe
    and bounded. Authorization is checked before every read of it (`cached_balance`)."""

    def __init__(
        self,
        ttl_s: float = BALANCE_CACHE_TTL_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = 50_000,
    ) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self.max_entries = max_entries
        self._entries: dict[tuple[int, str], tuple[float, Balance]] = {}
        self._cleared_at = float("-inf")
        self._lock = threading.Lock()
        _balance_caches.add(self)

    def get(self, user_id: int, address: str) -> Balance | None:
        with self._lock:
            hit = self._entries.get((user_id, address))
        if hit is None or not 0 <= self.clock() - hit[0] < self.ttl_s:
            return None
        return hit[1]

    def put(self, user_id: int, address: str, value: Balance, started: float) -> None:
        """Keep `value`, computed from reads that began at `started` (this cache's clock);
        a `clear` after that start wins, so a balance read before a payout is not kept."""
        with self._lock:
            if started < self._cleared_at:
                return
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[(user_id, address)] = (started, value)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._cleared_at = self.clock()


# Every live balance cache in this process: a recorded movement clears them all.
_balance_caches: weakref.WeakSet[BalanceCache] = weakref.WeakSet()


def clear_caches() -> None:
    """Forget every assembled balance in this process (the record changed)."""
    for cache in list(_balance_caches):
        cache.clear()


# --- whose balance --------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    text: str
    kind: str  # "address" | "stake"
    payment_hash: str | None
    stake_hash: str | None


# Decoding bech32 costs more than the rest of a cached balance read, and pollers send the
# same few addresses again and again: both parses are pure, so their answers are kept.
@functools.lru_cache(maxsize=65_536)
def parse_target(text: str, network: str) -> Target:
    try:
        address = Address.from_primitive(text)
    except Exception:
        raise BadRequest("not a bech32 Cardano address or stake address") from None
    if (str(address.network).endswith("MAINNET")) != (network == "mainnet"):
        raise BadRequest(f"address is for another network than this API's ({network})")
    payment = address.payment_part.payload.hex() if address.payment_part is not None else None
    stake = address.staking_part
    stake_hash = stake.payload.hex() if stake is not None and hasattr(stake, "payload") else None
    if payment is None and stake_hash is None:
        raise BadRequest("address has neither a payment nor a stake credential")
    return Target(text, "stake" if payment is None else "address", payment, stake_hash)


@functools.lru_cache(maxsize=65_536)
def _stake_hash(address: str) -> str | None:
    try:
        part = Address.from_primitive(address).staking_part
    except Exception:
        return None
    return part.payload.hex() if part is not None and hasattr(part, "payload") else None


def authorize(user: User, target: Target) -> None:
    """Balances are private: only the key that controls them reads them. An address's
    balance needs a session signed by its payment key; a stake address's, a session
    signed by that stake key (signed in as the stake address): naming a stake credential
    in one's own signed-in address proves nothing about it."""
    if target.kind == "address":
        if target.text == user.address or target.payment_hash == user.payment_key_hash:
            return
        raise Forbidden("balances are private: sign in with the wallet that owns this address")
    if target.stake_hash is not None and _signed_in_stake(user.address) == target.stake_hash:
        return
    raise Forbidden(
        "a stake address's balance needs its stake key: sign in with the stake address "
        "(your wallet signs with its stake key)"
    )


@functools.lru_cache(maxsize=65_536)
def _signed_in_stake(address: str) -> str | None:
    """The stake key hash a session proved: the user signed in as a stake address."""
    try:
        parsed = Address.from_primitive(address)
    except Exception:
        return None
    stake = parsed.staking_part
    if parsed.payment_part is not None or stake is None or not hasattr(stake, "payload"):
        return None
    return str(stake.payload.hex())


def known_addresses(session: Session | Connection, user: User, target: Target) -> list[str]:
    """The addresses a balance covers. A stake address covers every address the API knows
    with that stake credential (the devnet does not serve Blockfrost's account addresses)."""
    if target.kind == "address":
        return [target.text]
    found: set[str] = set()
    for address in session.execute(select(Provider.payout_address).distinct()).scalars():
        if _stake_hash(address) == target.stake_hash:
            found.add(address)
    return sorted(found)


# --- the balance ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Amount:
    lovelace: int | None
    ntx: int | None
    # Why a figure is missing or partial; empty when it is complete.
    note: str = ""


@dataclass(frozen=True)
class MovementView:
    """One recorded payout, refund, cancel or slash, with its explorer links."""

    row: movements.MovementRow
    explorer: dict[str, str]


@dataclass(frozen=True)
class Balance:
    target: Target
    addresses: tuple[str, ...]
    ntx_unit: str | None
    available: Amount
    in_escrow: Amount
    earned: Amount
    pending_settlement: Amount
    # Latest payouts to these addresses (kind payout), newest first.
    payouts: tuple[MovementView, ...]
    refunded: Amount = Amount(None, 0)
    slashed: Amount = Amount(None, 0)
    # Latest escrow returns to these addresses (refunds, settlement remainders, cancels).
    refunds: tuple[MovementView, ...] = ()


@dataclass(frozen=True)
class _Statements:
    escrows: Any
    completed_jobs: Any


@functools.cache
def _statements() -> _Statements:
    """The balance queries, built once (each request only binds its parameters)."""
    addresses: Any = bindparam("addresses", expanding=True)
    m = ChainMovement
    spent = exists().where(
        col(m.escrow_tx_id) == col(JobEscrow.tx_id),
        col(m.escrow_index) == col(JobEscrow.output_index),
    )
    return _Statements(
        escrows=select(JobEscrow.tx_id, JobEscrow.output_index, JobEscrow.budget)
        .join(Job, col(Job.id) == col(JobEscrow.job_id))
        .where(col(Job.owner_id).in_(bindparam("owners", expanding=True)))
        .order_by(col(JobEscrow.recorded_at).desc())
        .limit(MAX_ESCROW_CHECKS),
        # Jobs this provider completed whose recorded escrow the record does not show spent.
        completed_jobs=select(Job.id, Job.job_id, JobEscrow.tx_id, JobEscrow.output_index)
        .join(Lease, col(Lease.job_id) == col(Job.id))
        .join(Provider, col(Provider.id) == col(Lease.provider_id))
        .outerjoin(JobEscrow, col(JobEscrow.job_id) == col(Job.id))
        .where(
            col(Provider.payout_address).in_(addresses),
            Lease.outcome == "completed",
            ~spent,
        )
        .order_by(col(Lease.ended_at).desc())
        .limit(bindparam("limit", type_=Integer)),
    )


def _available(lookups: CachedLookups, addresses: Sequence[str]) -> Amount:
    lovelace, ntx = 0, 0
    ntx_known = True
    try:
        for address in addresses:
            held = lookups.holdings(address)
            lovelace += held.lovelace
            if held.ntx is None:
                ntx_known = False
            else:
                ntx += held.ntx
    except LookupFailed as e:
        return Amount(None, None, f"unknown: {e}")
    if not ntx_known:
        return Amount(lovelace, None, "NTX unknown: no NTX policy id is configured")
    return Amount(lovelace, ntx)


def _in_escrow(
    session: Session | Connection, lookups: CachedLookups, owner_ids: Sequence[int]
) -> Amount:
    if not owner_ids:
        return Amount(None, 0)
    rows = session.execute(_statements().escrows, {"owners": list(owner_ids)}).all()
    total, unknown = 0, 0
    for tx_id, index, budget in rows:
        try:
            if lookups.output_unspent(tx_id, index):
                total += budget
        except LookupFailed:
            unknown += 1
    note = ""
    if unknown:
        note = f"{unknown} escrow(s) could not be checked on chain and are not counted"
    if len(rows) == MAX_ESCROW_CHECKS:
        note = (note + "; " if note else "") + f"only the latest {MAX_ESCROW_CHECKS} escrows"
    return Amount(None, total, note)


def pending_settlement(
    session: Session | Connection, lookups: CachedLookups, addresses: Sequence[str]
) -> Amount:
    """What the oracle has verified for these payout addresses and the record does not show
    paid: attestations of jobs they completed, while the attested escrow is unspent."""
    rows = session.execute(
        _statements().completed_jobs,
        {"addresses": list(addresses), "limit": 4 * MAX_PENDING_JOBS},
    ).all()
    jobs: dict[str, tuple[str, int] | None] = {}
    for _pk, job_id, tx_id, index in rows:
        if job_id not in jobs and len(jobs) < MAX_PENDING_JOBS:
            jobs[job_id] = None if tx_id is None else (tx_id, int(index))
    wanted = set(addresses)
    due: list[tuple[tuple[str, int] | None, int]] = []
    try:
        for job_id, recorded in jobs.items():
            for att in lookups.job_attestations(job_id):
                amount = att.get("amount")
                if (
                    att.get("status") in PENDING_STATUSES
                    and att.get("payout_address") in wanted
                    and isinstance(amount, int)
                    and amount >= 0
                ):
                    due.append((_attested_escrow(att) or recorded, amount))
    except LookupFailed as e:
        return Amount(None, None, f"unknown: {e}")
    closed = movements.closed_escrows(session, [r for r, _ in due if r is not None])
    total = sum(amount for ref, amount in due if ref is None or ref not in closed)
    note = (
        f"over the latest {MAX_PENDING_JOBS} unpaid jobs" if len(jobs) == MAX_PENDING_JOBS else ""
    )
    return Amount(None, total, note)


def _attested_escrow(att: dict[str, Any]) -> tuple[str, int] | None:
    escrow = att.get("escrow")
    if isinstance(escrow, dict):
        tx_id, index = escrow.get("tx_id"), escrow.get("index")
        if isinstance(tx_id, str) and isinstance(index, int):
            return tx_id, index
    return None


def recorded_movements(
    session: Session | Connection, addresses: Sequence[str], *, network: str, devnet_url: str
) -> tuple[Amount, Amount, Amount, tuple[MovementView, ...], tuple[MovementView, ...]]:
    """(earned, refunded, slashed, latest payouts, latest refunds) of these addresses."""
    found = movements.totals(session, addresses)
    earned = movements.sum_of(found, movements.PAYOUT_KINDS)
    refunded = movements.sum_of(found, movements.REFUND_KINDS)
    slashed = movements.sum_of(found, movements.SLASH_KINDS)

    def views(kinds: Sequence[str]) -> tuple[MovementView, ...]:
        return tuple(
            MovementView(r, explorer_links(network, devnet_url, r.tx_hash))
            for r in movements.latest(session, addresses, kinds, MAX_PAYOUTS)
        )

    return (
        Amount(earned.lovelace, earned.ntx),
        Amount(refunded.lovelace, refunded.ntx),
        Amount(None, slashed.ntx),
        views(movements.PAYOUT_KINDS),
        views(movements.REFUND_KINDS),
    )


def cached_balance(
    cache: BalanceCache, user: User, target_text: str, *, network: str
) -> Balance | None:
    """The balance `balance` assembled for this user and address less than the cache's TTL
    ago, None if there is none. Validates and authorizes the address first, like `balance`."""
    authorize(user, parse_target(target_text, network))
    assert user.id is not None
    return cache.get(user.id, target_text)


def balance(
    session: Session | Connection,
    lookups: CachedLookups,
    user: User,
    target_text: str,
    *,
    network: str,
    devnet_url: str,
    ntx_unit: str | None,
    cache: BalanceCache | None = None,
) -> Balance:
    started = cache.clock() if cache is not None else 0.0
    target = parse_target(target_text, network)
    authorize(user, target)
    addresses = known_addresses(session, user, target)
    if addresses == [user.address]:  # the common case: your own address, no query needed
        owner_ids: list[int | None] = [user.id]
    else:
        owner_ids = list(
            session.execute(select(User.id).where(col(User.address).in_(addresses))).scalars()
        )
    earned, refunded, slashed, payouts, refunds = recorded_movements(
        session, addresses, network=network, devnet_url=devnet_url
    )
    result = Balance(
        target=target,
        addresses=tuple(addresses),
        ntx_unit=ntx_unit,
        available=_available(lookups, addresses),
        in_escrow=_in_escrow(session, lookups, [i for i in owner_ids if i is not None]),
        earned=earned,
        pending_settlement=pending_settlement(session, lookups, addresses),
        payouts=payouts,
        refunded=refunded,
        slashed=slashed,
        refunds=refunds,
    )
    if cache is not None:
        assert user.id is not None
        cache.put(user.id, target_text, result, started)
    return result


@dataclass(frozen=True)
class BalanceSources:
    """Where balances read the chain and the oracle from, and how results are labelled."""

    lookups: CachedLookups
    devnet_url: str
    ntx_unit: str | None
    # Assembled balances; by default kept no longer than the lookups' answers.
    balances: BalanceCache = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.balances is None:
            ttl = min(BALANCE_CACHE_TTL_S, self.lookups.ttl_s)
            object.__setattr__(self, "balances", BalanceCache(ttl))

    @classmethod
    def from_settings(cls, settings: Any, *, ttl_s: float = 10.0) -> BalanceSources:
        from chain.offchain.backends import chain_context

        policy = str(settings.ntx_policy_id or "").lower()
        unit = policy + str(settings.ntx_asset_name or "").lower() if policy else None
        oracle_url = str(getattr(settings, "oracle_url", "") or "")
        chain = ContextChainReader(lambda: chain_context(settings), unit)
        oracle = HttpOracleReader(oracle_url) if oracle_url else None
        return cls(CachedLookups(chain, oracle, ttl_s=ttl_s), settings.devnet_url, unit)
