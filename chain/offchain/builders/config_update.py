"""Rewrite the oracle configuration (admin quorum): rotate oracle keys and thresholds.

Spends the config NFT UTxO with `UpdateConfig(0)` (the oracle-config script by reference)
and returns the NFT to the config script in output 0 with the new `OracleConfigDatum`.
The admin quorum of the CURRENT datum must sign (required signers). What a rotation
cannot do: settle or cancel escrows locked before it. Each escrow pins the oracle set it
was locked under (`EscrowDatum.oracle_set`), so escrows of the old set wait for it to be
restored or refund after their deadline (docs/protocol.md, Trust model).
"""

from __future__ import annotations

from collections.abc import Sequence

from pycardano import Address, ChainContext, UTxO, VerificationKeyHash

from chain.contracts import types as t
from chain.offchain.builders import assembly as A
from chain.offchain.builders.deploy import OracleSetup
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.errors import BuilderError
from chain.offchain.builders.protocol_utxos import ProtocolUtxos, resolve


def build_config_update(
    context: ChainContext,
    deployment: Deployment,
    setup: OracleSetup,
    admin_signers: Sequence[VerificationKeyHash],
    payer: Address,
    payer_utxos: Sequence[UTxO] | None = None,
    *,
    protocol: ProtocolUtxos | None = None,
) -> A.BuiltTx:
    """An unsigned update of the configuration to `setup` (same batch credential), signed
    by `admin_signers` (an admin quorum of the current configuration) and paid by `payer`."""
    protocol = protocol or resolve(context, deployment)
    current = protocol.config_datum
    signed = {k.payload for k in admin_signers} & set(current.admins)
    if len(signed) < current.admin_threshold:
        raise BuilderError(
            f"{len(signed)} of the given signers are admins of the config; "
            f"{current.admin_threshold} needed"
        )
    new = setup.datum(bytes.fromhex(deployment.batch_hash))
    config = protocol.config
    out = A.output_with_min_ada(
        context,
        config.output.address,
        config.output.amount.multi_asset,
        datum=new,
        at_least=config.output.amount.coin,
    )
    plan = A.TxPlan(
        change_address=payer,
        script_inputs=[A.ScriptInput(config, t.UpdateConfig(0))],
        outputs=[out],
        reference_inputs=[protocol.config_script],
        required_signers=list(admin_signers),
    )
    utxos = list(context.utxos(payer)) if payer_utxos is None else list(payer_utxos)
    return A.finalize(context, plan, utxos)
