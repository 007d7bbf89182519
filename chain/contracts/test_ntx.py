"""Test-NTX minting policy for the devnet and preprod, parameterised by an admin key hash.

The admin key mints any amount of any token name under this policy; anyone may burn
tokens they hold. Production uses the real NTX unit (configuration), never this policy.
"""

from chain.contracts.rules import *


def validator(admin_pkh: bytes, context: ScriptContext) -> None:
    purpose = context.purpose
    assert isinstance(purpose, MintingScript), "test NTX only validates minting"
    tx = context.transaction
    only_burns = True
    for amount in tx.mint[purpose.policy_id].values():
        if amount > 0:
            only_burns = False
    if not only_burns:
        assert admin_pkh in tx.signatories, "minting needs the admin signature"
