"""An inline EscrowDatum (hex CBOR) for a job id, as a lock transaction would write it."""

from __future__ import annotations

from chain.contracts import types as t


def datum_hex(job_id: str, *, budget: int = 1_500_000, deadline_ms: int = 2**41) -> str:
    pkh = b"\x33" * 28
    datum = t.EscrowDatum(
        batch_credential=b"\x11" * 28,
        job_id=bytes.fromhex(job_id),
        submitter=t.Address(t.PubKeyCredential(pkh), t.NoStakingCredential()),
        submitter_pkh=pkh,
        budget=budget,
        ntx_policy=b"\xab" * 28,
        ntx_name=b"NTX",
        deadline=deadline_ms,
        config_policy=b"\x22" * 28,
        config_name=t.CONFIG_NFT_NAME,
        cancel_allowed_until=t.NoPosixTime(),
        nonce=0,
    )
    return datum.to_cbor_hex()
