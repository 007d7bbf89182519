"""Sealed-bid reverse auctions: the bid format and the clearing rule, defined once.

A job priced by auction (`AuctionPrice` in `proofnet.messages.jobspec`) names a reserve (the
most it pays, what the escrow locks) and a bidding window. Providers whose hardware fits
bid in two steps, so nobody can react to another's price:

1. **commit** (during the window): the provider sends `commitment = SHA-256(DOMAIN ||
   canonical JSON of its bid)`; the bid itself (amount and a random salt) stays on its
   machine;
2. **reveal** (after the window, before the reveal deadline): it sends the bid and its
   Ed25519 signature over the same bytes; a reveal that does not hash to a commitment made
   in the window is refused.

`clear` is the whole pricing rule, and the API, the worker and the oracle all call it: bids
above the reserve are out; the lowest bid wins; the winner is paid the second-lowest bid
(the reserve when it bid alone). Paying the second price makes bidding one's true cost
the best strategy, so providers need no market intelligence to bid. Equal bids are ordered
by `SHA-256(tie seed || worker key)`, where the tie seed hashes every commitment of the
window: no provider knows it before the window closes, and anyone can recompute it.

The oracle re-verifies every revealed bid's signature and re-runs `clear` before it signs a
payout, so an API cannot invent a bid or a price. What it must still trust the API for is
*completeness and timing* (that no commitment was dropped and none was taken after the
window closed): docs/pricing.md states that limit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Final

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey
from pydantic import Field, ValidationError

from proofnet.messages.canonical import CanonicalJSONError, canonical_json, parse_canonical_json
from proofnet.messages.fields import Frozen, Hex64, Version1

BID_DOMAIN: Final = b"proofnet/auction-bid/v1"
TIE_DOMAIN: Final = b"proofnet/auction-tie/v1"
BID_VERSION: Final = 1
# Token quantities in a Cardano value are at most 2**63 - 1.
MAX_AMOUNT: Final = 2**63 - 1
# Salts are 32 random bytes: a commitment must not be brute-forced back to its amount.
SALT_HEX_LEN: Final = 64
# The most bids one job's auction takes: bounds the clearing work and the feed's size.
MAX_BIDS: Final = 1_000

Amount = Annotated[int, Field(ge=1, le=MAX_AMOUNT)]
Hex128 = Annotated[str, Field(pattern=r"^[0-9a-f]{128}$")]


class AuctionError(ValueError):
    """A bid is malformed, unsigned, or does not match its commitment; the message says why."""


class Bid(Frozen):
    """One provider's sealed bid for one job: what it asks to be paid, in NTX base units."""

    version: Version1 = BID_VERSION
    job_id: Hex64
    worker_key: Hex64  # the bidder's raw Ed25519 worker key, hex
    amount: Amount
    salt: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="python"))

    @property
    def commitment(self) -> str:
        return commitment_of(self.canonical_bytes())


class RevealedBid(Frozen):
    """A bid with the bidder's signature over its canonical bytes (domain-separated)."""

    bid: Bid
    signature: Hex128

    def verify(self) -> None:
        """Raise `AuctionError` unless the bidder's key signed this bid."""
        try:
            VerifyKey(bytes.fromhex(self.bid.worker_key)).verify(
                BID_DOMAIN + self.bid.canonical_bytes(), bytes.fromhex(self.signature)
            )
        except (BadSignatureError, ValueError) as exc:
            raise AuctionError(
                f"the bid of {self.bid.worker_key} is not signed by that worker key"
            ) from exc


def commitment_of(canonical_bid: bytes) -> str:
    return hashlib.sha256(BID_DOMAIN + canonical_bid).hexdigest()


def new_bid(job_id: str, worker_key: str, amount: int, salt: bytes) -> Bid:
    if len(salt) != 32:
        raise AuctionError("a bid's salt must be 32 random bytes")
    try:
        return Bid(job_id=job_id, worker_key=worker_key, amount=amount, salt=salt.hex())
    except ValidationError as exc:
        raise AuctionError(f"invalid bid: {_first_error(exc)}") from None


def sign_bid(bid: Bid, signing_key: SigningKey) -> RevealedBid:
    if signing_key.verify_key.encode().hex() != bid.worker_key:
        raise AuctionError("a bid is signed by the key it names")
    signature = signing_key.sign(BID_DOMAIN + bid.canonical_bytes()).signature
    return RevealedBid(bid=bid, signature=signature.hex())


def parse_revealed(raw: object) -> RevealedBid:
    """A revealed bid from untrusted JSON (already parsed), signature checked."""
    try:
        revealed = RevealedBid.model_validate(raw)
    except ValidationError as exc:
        raise AuctionError(f"invalid revealed bid: {_first_error(exc)}") from None
    revealed.verify()
    return revealed


def parse_bid_bytes(data: bytes) -> Bid:
    """A bid from bytes that must be exactly its canonical encoding."""
    try:
        return Bid.model_validate(parse_canonical_json(data))
    except (CanonicalJSONError, ValidationError) as exc:
        raise AuctionError(f"invalid bid: {exc}") from None


def tie_seed(commitments: Iterable[str]) -> bytes:
    """Known only once the window has closed (it hashes every commitment made in it)."""
    h = hashlib.sha256(TIE_DOMAIN)
    for c in sorted(set(commitments)):
        h.update(bytes.fromhex(c))
    return h.digest()


def _tie_rank(seed: bytes, worker_key: str) -> bytes:
    return hashlib.sha256(seed + bytes.fromhex(worker_key)).digest()


@dataclass(frozen=True)
class Clearing:
    """The outcome of an auction: who runs the job and what it is paid (None: no bid fits)."""

    winner: str | None
    price: int | None
    # Eligible bidders in rank order (lowest bid first, ties by the seeded rank).
    ranking: tuple[str, ...]
    reason: str


def clear(
    *,
    job_id: str,
    reserve: int,
    bids: Sequence[RevealedBid],
    commitments: Iterable[str],
    verify_signatures: bool = True,
) -> Clearing:
    """Second-price sealed-bid reverse auction under `reserve`.

    `bids` are the revealed bids; `commitments` every commitment made in the window (revealed
    or not) for the tie seed. Each worker key counts once: a second bid by the same key is
    refused here, whoever let it through."""
    if len(bids) > MAX_BIDS:
        raise AuctionError(f"{len(bids)} bids: an auction takes at most {MAX_BIDS}")
    committed = set(commitments)
    seen: set[str] = set()
    eligible: list[Bid] = []
    for revealed in bids:
        bid = revealed.bid
        if verify_signatures:
            revealed.verify()
        if bid.job_id != job_id:
            raise AuctionError(f"a bid of {bid.worker_key} is for job {bid.job_id}, not {job_id}")
        if bid.commitment not in committed:
            raise AuctionError(f"the bid of {bid.worker_key} matches no commitment of the window")
        if bid.worker_key in seen:
            raise AuctionError(f"worker {bid.worker_key} bid twice")
        seen.add(bid.worker_key)
        if bid.amount <= reserve:
            eligible.append(bid)
    if not eligible:
        return Clearing(None, None, (), f"no revealed bid at or under the reserve {reserve}")
    seed = tie_seed(committed)
    ranked = sorted(eligible, key=lambda b: (b.amount, _tie_rank(seed, b.worker_key)))
    winner = ranked[0]
    if len(ranked) == 1:
        price, why = reserve, "one bid at or under the reserve: paid the reserve"
    else:
        price = ranked[1].amount
        why = f"lowest of {len(ranked)} bids wins, paid the second-lowest bid"
    return Clearing(winner.worker_key, price, tuple(b.worker_key for b in ranked), why)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()))
    return f"{where}: {err.get('msg')}" if where else str(err.get("msg"))
