"""Oracle configuration: ONE script that is both the config NFT's one-shot minting policy
and the spending validator holding it, parameterised by a seed UTxO.

Being one script, its policy id and its payment credential are the same hash, so the NFT's
policy names the one address where the configuration may live, and every reader checks
it: the config is the reference input whose payment credential is the policy's own
script (`rules.config_from`, and off-chain `builders.protocol_utxos.resolve`).

- Mint: the seed UTxO is spent (so it happens once), exactly one CONFIG_NFT_NAME is minted
  and nothing else under this policy, and it lands in the named output, whose payment
  credential is this script, with an inline, valid OracleConfigDatum. A mint into a key
  wallet (or any other script) is refused. Burning is impossible (it needs the seed).
- Spend the NFT UTxO: the admin quorum of the CURRENT datum signs, and the NFT comes back
  to this same address (full address) in the named output with an inline datum that is a
  valid configuration.
- Spend a stray UTxO sent here without the NFT: only next to the NFT UTxO, i.e. with the
  admin quorum too, so nothing is stranded.
"""

from opshin.std.integrity import check_integrity

from chain.contracts.rules import *


def mint_config(seed: TxOutRef, own_hash: bytes, tx: TxInfo, redeemer: MintConfigNft) -> None:
    minted = tx.mint[own_hash]
    assert len(minted) == 1 and minted.get(CONFIG_NFT_NAME, 0) == 1, "mint exactly one NFT"
    seed_spent = False
    for i in tx.inputs:
        if i.out_ref == seed:
            seed_spent = True
    assert seed_spent, "seed UTxO not spent"
    check_integrity(redeemer)
    out = tx.outputs[redeemer.output_index]
    own_cred: Credential = ScriptCredential(own_hash)
    assert out.address.payment_credential == own_cred, "config NFT must land at the config script"
    assert ntx_of(out.value, own_hash, CONFIG_NFT_NAME) == 1, "NFT not in the named output"
    od = out.datum
    assert isinstance(od, SomeOutputDatum), "config must be an inline datum"
    cfg: OracleConfigDatum = od.datum
    check_integrity(cfg)
    assert valid_config(cfg), "invalid config"


def spend_config(tx: TxInfo, purpose: SpendingScript, update: UpdateConfig) -> None:
    own_ref = purpose.tx_out_ref
    own_found = False
    own = tx.inputs[0].resolved
    for i in tx.inputs:
        if i.out_ref == own_ref:
            own = i.resolved
            own_found = True
    assert own_found, "own input not found"
    cred = own.address.payment_credential
    assert isinstance(cred, ScriptCredential), "own input is not at a script"
    own_hash = cred.credential_hash
    if ntx_of(own.value, own_hash, CONFIG_NFT_NAME) == 1:
        maybe_datum: SomeDatum = purpose.datum
        current: OracleConfigDatum = maybe_datum.datum
        assert count_signers(current.admins, tx.signatories) >= current.admin_threshold, "admins"
        check_integrity(update)
        out = tx.outputs[update.output_index]
        assert out.address == own.address, "config NFT must stay at the config script"
        assert ntx_of(out.value, own_hash, CONFIG_NFT_NAME) == 1, "config NFT must stay"
        od = out.datum
        assert isinstance(od, SomeOutputDatum), "new config must be an inline datum"
        new: OracleConfigDatum = od.datum
        check_integrity(new)
        assert valid_config(new), "invalid new config"
    else:
        nft_spent = False
        for i in tx.inputs:
            if ntx_of(i.resolved.value, own_hash, CONFIG_NFT_NAME) == 1:
                nft_spent = True
        assert nft_spent, "stray UTxO: spend it together with the config NFT"


def validator(seed: TxOutRef, context: ScriptContext) -> None:
    purpose = context.purpose
    tx = context.transaction
    if isinstance(purpose, MintingScript):
        mint: MintConfigNft = context.redeemer
        mint_config(seed, purpose.policy_id, tx, mint)
    elif isinstance(purpose, SpendingScript):
        update: UpdateConfig = context.redeemer
        spend_config(tx, purpose, update)
    else:
        assert False, "config script only validates minting and spending"
