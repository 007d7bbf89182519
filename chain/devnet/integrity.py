"""The script-data (script integrity) hash, computed as the Conway ledger computes it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import cbor2

from chain.devnet.txdecode import blake2b_256

# Script-language prefix (1..3) -> the ledger's language id and cost-model name.
LANGUAGE_IDS = {1: 0, 2: 1, 3: 2}
COST_MODEL_NAMES = {1: "PlutusV1", 2: "PlutusV2", 3: "PlutusV3"}

# What an absent redeemer field encodes as in the Conway era (an empty map).
EMPTY_REDEEMERS = b"\xa0"


class MissingCostModel(ValueError):
    """A language is used but the protocol parameters carry no cost model for it."""


def _map_head(count: int) -> bytes:
    if count < 24:
        return bytes([0xA0 | count])
    return b"\xb8" + bytes([count])  # at most three languages ever; one extra byte suffices


def language_views(cost_models: Mapping[str, Sequence[int]], languages: Iterable[int]) -> bytes:
    """Encoded language views of `languages` (script-language prefixes 1..3).

    PlutusV1 keeps the Alonzo quirk: its key and value are serialized twice (a byte string
    holding the encoded id, and a byte string holding an indefinite list). Entries are sorted
    by the shortlex order of their encoded keys, so V1 (a 2-byte key) comes last.
    """
    pairs: list[tuple[bytes, bytes]] = []
    for lang in set(languages):
        name = COST_MODEL_NAMES[lang]
        model = cost_models.get(name)
        if not model:
            raise MissingCostModel(f"no cost model for {name}")
        lang_id = LANGUAGE_IDS[lang]
        if lang == 1:
            inner = b"\x9f" + b"".join(cbor2.dumps(int(v)) for v in model) + b"\xff"
            pairs.append((cbor2.dumps(cbor2.dumps(lang_id)), cbor2.dumps(inner)))
        else:
            pairs.append((cbor2.dumps(lang_id), cbor2.dumps([int(v) for v in model])))
    pairs.sort(key=lambda kv: (len(kv[0]), kv[0]))
    return _map_head(len(pairs)) + b"".join(k + v for k, v in pairs)


def script_integrity_hash(
    redeemers_raw: bytes | None,
    datums_raw: bytes | None,
    cost_models: Mapping[str, Sequence[int]],
    languages: Iterable[int],
    has_redeemers: bool,
    has_datums: bool,
) -> bytes | None:
    """The hash the body's script_data_hash must equal, or None when it must be absent."""
    langs = set(languages)
    if not has_redeemers and not has_datums and not langs:
        return None
    redeemer_bytes = redeemers_raw if redeemers_raw is not None else EMPTY_REDEEMERS
    datum_bytes = datums_raw if (datums_raw is not None and has_datums) else b""
    return blake2b_256(redeemer_bytes + datum_bytes + language_views(cost_models, langs))
