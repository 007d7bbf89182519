"""One transaction's outputs, spent or not, as `EscrowFacts`, through whichever chain backend a
role runs on: a Blockfrost-shaped REST (the devnet, hosted Blockfrost: `/txs/{hash}/utxos`)
or a self-hosted node's Kupo (`/matches/*@{tx id}`, inline datums from `/datums/{hash}`).

The API (recording and re-checking an escrow), the slash builder (whom a slash pays) and the
oracle (`oracle.inputs.chain`) read escrows here, so an escrow reads the same on every
backend. A Kupo answer is checked before it is believed: every match must be of the
transaction asked, no output index twice, and an inline datum must hash to the match's
`datum_hash`; anything else is `ChainDataError` (a lying or broken index: ask again later,
never a verdict). I/O: the backend calls below; the reading is `escrow_terms`' (pure).
"""

from __future__ import annotations

import hashlib
from contextlib import closing
from typing import Any

from chain.offchain.backends import NodeChainContext
from chain.offchain.errors import BackendConfigError, BackendUnavailableError
from chain.offchain.escrow_terms import EscrowFacts, facts_from_blockfrost, facts_from_kupo
from chain.offchain.follow.kupo import Kupo
from chain.offchain.follow.model import ChainDataError

NEEDS_KUPO = (
    "reading escrow outputs on PROOFNET_CHAIN_BACKEND=ogmios needs Kupo: set PROOFNET_KUPO_URL "
    '(Kupo indexing every output, --match "*", without --prune-utxo)'
)


def kupo_outputs(kupo: Kupo, tx_id: str) -> dict[int, EscrowFacts]:
    """Output index -> facts of every output Kupo holds for `tx_id` ({} when it has none).
    Raises BackendUnavailableError (Kupo down) or ChainDataError (an answer not to be
    believed)."""
    found: dict[int, EscrowFacts] = {}
    for match in kupo.matches(f"*@{tx_id}"):
        try:
            asked = match.get("transaction_id") == tx_id
            index = int(match["output_index"])
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ChainDataError(f"Kupo's match for {tx_id} does not read: {exc}") from exc
        if not asked:
            raise ChainDataError(
                f"Kupo answered {match.get('transaction_id')!r} when asked for {tx_id}"
            )
        if index in found:
            raise ChainDataError(f"Kupo answered output {index} of {tx_id} twice")
        ref = f"{tx_id}#{index}"
        try:
            found[index] = facts_from_kupo(ref, match, _inline_datum(kupo, ref, match))
        except (KeyError, TypeError, ValueError) as exc:
            raise ChainDataError(f"Kupo's match for {ref} does not read: {exc}") from exc
    return found


def _inline_datum(kupo: Kupo, ref: str, match: Any) -> str | None:
    """The inline datum's CBOR hex, checked against the hash Kupo gives for it."""
    datum_hash = match.get("datum_hash")
    if match.get("datum_type") != "inline":
        return None  # none, or by hash: no escrow (Blockfrost's `inline_datum` is null too)
    if not datum_hash:
        raise ChainDataError(f"Kupo lists an inline datum for {ref} without its hash")
    cbor = kupo.datum(str(datum_hash))
    if cbor is None:
        raise ChainDataError(f"Kupo lists an inline datum {datum_hash} for {ref} it cannot serve")
    if hashlib.blake2b(cbor, digest_size=32).hexdigest() != str(datum_hash).lower():
        raise ChainDataError(f"Kupo's datum for {ref} does not hash to {datum_hash}")
    return cbor.hex()


def blockfrost_outputs(api: Any, tx_id: str) -> dict[int, EscrowFacts]:
    """Output index -> facts through a Blockfrost-shaped client (`transaction_utxos`); {} for
    a transaction the chain does not know. Raises BackendUnavailableError or ChainDataError."""
    try:
        body = api.transaction_utxos(hash=tx_id, return_type="json")
    except Exception as exc:  # every backend raises its own kinds
        if getattr(exc, "status_code", None) == 404:
            return {}
        raise BackendUnavailableError(f"chain backend failed looking up {tx_id}: {exc}") from exc
    found: dict[int, EscrowFacts] = {}
    try:
        for out in body.get("outputs", []):
            if out.get("collateral"):
                continue  # a valid transaction's collateral return never exists (Kupo agrees)
            index = int(out["output_index"])
            found[index] = facts_from_blockfrost(f"{tx_id}#{index}", out)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ChainDataError(f"chain backend answered nonsense for {tx_id}: {exc}") from exc
    return found


def transaction_outputs(context: Any, tx_id: str) -> dict[int, EscrowFacts]:
    """Output index -> facts of `tx_id`'s outputs through the role's chain context. Raises
    BackendConfigError for a context that cannot read spent outputs (Ogmios without Kupo)."""
    api = getattr(context, "api", None)
    if hasattr(api, "transaction_utxos"):
        return blockfrost_outputs(api, tx_id)
    if isinstance(context, NodeChainContext):
        with closing(Kupo(context.kupo_url)) as kupo:
            return kupo_outputs(kupo, tx_id)
    if type(context).__name__ == "OgmiosV6ChainContext":
        raise BackendConfigError(NEEDS_KUPO)
    raise BackendConfigError(
        f"{type(context).__name__} cannot read outputs by reference: use "
        "PROOFNET_CHAIN_BACKEND=devnet, blockfrost or ogmios (with PROOFNET_KUPO_URL)"
    )


def output_facts(context: Any, tx_id: str, index: int) -> EscrowFacts | None:
    """The output `tx_id#index`, spent or not, or None when the chain does not know it."""
    return transaction_outputs(context, tx_id).get(index)
