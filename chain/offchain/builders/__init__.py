"""Transaction builders of the on-chain protocol (pycardano), one module per action.

    deploy      -> Deployment (deployment.json)      deploy.deploy
    test NTX    -> MintResult                        mint.mint_test_ntx
    lock        -> LockResult / UnsignedLock         lock.lock_escrows, build_lock_unsigned, assemble
    settle      -> BatchTx                           settle.build_settle_batch, pack_settle_batch
    refund      -> ReturnTx                          refund.build_refund
    cancel      -> ReturnTx                          refund.build_cancel
    config      -> BuiltTx (admin quorum)            config_update.build_config_update
    bond        -> BondTx                            bond.build_lock_bond, build_unbond,
                                                     build_withdraw, build_slash

Builders return unsigned transactions with their measured cost (`assembly.BuiltTx`);
`assembly.sign` / `assembly.add_witnesses` add signatures and `assembly.submit` submits.
"""

from chain.offchain.builders.assembly import BuiltTx, add_witnesses, sign, submit
from chain.offchain.builders.config_update import build_config_update
from chain.offchain.builders.deploy import OracleSetup, deploy
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.errors import (
    BuilderError,
    InsufficientFundsError,
    ScriptEvaluationError,
)
from chain.offchain.builders.lock import (
    EscrowJob,
    LockResult,
    UnsignedLock,
    assemble,
    build_lock,
    build_lock_unsigned,
    lock_escrows,
)
from chain.offchain.builders.mint import MintResult, build_mint_test_ntx, mint_test_ntx
from chain.offchain.builders.refund import ReturnTx, build_cancel, build_refund
from chain.offchain.builders.settle import (
    BatchTx,
    Settlement,
    build_settle_batch,
    pack_settle_batch,
)
from chain.offchain.builders.wallet import KeyWallet

__all__ = [
    "BatchTx",
    "BuilderError",
    "BuiltTx",
    "Deployment",
    "EscrowJob",
    "InsufficientFundsError",
    "KeyWallet",
    "LockResult",
    "MintResult",
    "OracleSetup",
    "ReturnTx",
    "ScriptEvaluationError",
    "Settlement",
    "UnsignedLock",
    "add_witnesses",
    "assemble",
    "build_cancel",
    "build_config_update",
    "build_lock",
    "build_lock_unsigned",
    "build_mint_test_ntx",
    "build_refund",
    "build_settle_batch",
    "deploy",
    "lock_escrows",
    "mint_test_ntx",
    "pack_settle_batch",
    "sign",
    "submit",
]
