"""pycardano's script-data hash over the 350-entry V3 model, read through its Blockfrost
context, is the one the ledger computes (another library broke on this after PV11)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import cbor2

from chain.devnet.cost_model_tables import VAN_ROSSEM_PLUTUSV3
from chain.devnet.integrity import language_views
from chain.devnet.testing import running_devnet
from chain.devnet.txdecode import decode_tx


def cost_models_cbor_list() -> list[int]:
    return list(VAN_ROSSEM_PLUTUSV3)


def test_pycardano_v3_tx_is_accepted_with_the_ledger_hash(tmp_path: Path) -> None:
    import server_scenario

    with running_devnet(tmp_path, block_time=0.1, profile="mainnet") as devnet:
        ctx = devnet.chain_context()
        v3 = ctx.protocol_param.cost_models["PlutusV3"]
        assert len(v3) == 350
        sc = server_scenario.build_real(devnet)  # a pycardano-built Plutus V3 spend
        record = devnet.ledger.transaction(sc.spend_tx)
        assert record is not None  # accepted and confirmed: the ledger checked the hash
        tx = decode_tx(record.cbor)
        # Independent computation: blake2b-256(redeemers || datums || {2: [350 ints]}), the
        # language view written by hand from the published list (not by the devnet's code).
        values = list(v3.values())
        assert values == cost_models_cbor_list()
        view = b"\xa1\x02" + cbor2.dumps(values)
        assert language_views({"PlutusV3": values}, [3]) == view
        datums = tx.datums_raw if tx.datums_raw is not None else b""
        expected = hashlib.blake2b(
            (tx.redeemers_raw or b"\xa0") + datums + view, digest_size=32
        ).digest()
        assert tx.script_data_hash == expected
