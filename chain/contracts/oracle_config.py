"""Oracle configuration spending validator, parameterised by the config NFT policy.

The UTxO holding the config NFT carries the OracleConfigDatum every escrow and the batch
script trust. Spending it needs the admin quorum of the CURRENT datum, and the NFT must
come back to this same address (full address) in the named output with an inline datum
that is a valid configuration. A stray UTxO sent here without the NFT can be spent only
next to the NFT UTxO, i.e. with the admin quorum too, so nothing is stranded.
"""

from opshin.std.integrity import check_integrity

from chain.contracts.rules import *


def validator(config_policy: bytes, context: ScriptContext) -> None:
    purpose = context.purpose
    assert isinstance(purpose, SpendingScript), "config only validates spending"
    tx = context.transaction
    own_ref = purpose.tx_out_ref
    own_found = False
    nft_spent = False
    own = tx.inputs[0].resolved
    for i in tx.inputs:
        if i.out_ref == own_ref:
            own = i.resolved
            own_found = True
        if ntx_of(i.resolved.value, config_policy, CONFIG_NFT_NAME) == 1:
            nft_spent = True
    assert own_found, "own input not found"
    if ntx_of(own.value, config_policy, CONFIG_NFT_NAME) == 1:
        maybe_datum: SomeDatum = purpose.datum
        current: OracleConfigDatum = maybe_datum.datum
        assert count_signers(current.admins, tx.signatories) >= current.admin_threshold, "admins"
        redeemer: UpdateConfig = context.redeemer
        check_integrity(redeemer)
        out = tx.outputs[redeemer.output_index]
        assert out.address == own.address, "config NFT must stay at the config script"
        assert ntx_of(out.value, config_policy, CONFIG_NFT_NAME) == 1, "config NFT must stay"
        od = out.datum
        assert isinstance(od, SomeOutputDatum), "new config must be an inline datum"
        new: OracleConfigDatum = od.datum
        check_integrity(new)
        assert valid_config(new), "invalid new config"
    else:
        assert nft_spent, "stray UTxO: spend it together with the config NFT"
