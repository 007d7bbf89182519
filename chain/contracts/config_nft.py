"""One-shot minting policy of the oracle config NFT, parameterised by a seed UTxO.

Minting needs the seed UTxO to be spent (so it can happen once), mints exactly one token
named CONFIG_NFT_NAME and nothing else under this policy, and sends it to the named output
with an inline, valid OracleConfigDatum. Burning is impossible: the NFT never leaves the
oracle-config script.
"""

from opshin.std.integrity import check_integrity

from chain.contracts.rules import *


def validator(seed: TxOutRef, context: ScriptContext) -> None:
    purpose = context.purpose
    assert isinstance(purpose, MintingScript), "config NFT only validates minting"
    tx = context.transaction
    policy = purpose.policy_id
    minted = tx.mint[policy]
    assert len(minted) == 1 and minted.get(CONFIG_NFT_NAME, 0) == 1, "mint exactly one NFT"
    seed_spent = False
    for i in tx.inputs:
        if i.out_ref == seed:
            seed_spent = True
    assert seed_spent, "seed UTxO not spent"
    redeemer: MintConfigNft = context.redeemer
    check_integrity(redeemer)
    out = tx.outputs[redeemer.output_index]
    assert ntx_of(out.value, policy, CONFIG_NFT_NAME) == 1, "NFT not in the named output"
    od = out.datum
    assert isinstance(od, SomeOutputDatum), "config must be an inline datum"
    cfg: OracleConfigDatum = od.datum
    check_integrity(cfg)
    assert valid_config(cfg), "invalid config"
