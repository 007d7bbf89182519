"""On-chain helpers shared by the validators (compiled into each one that uses them)."""

from hashlib import blake2b

from opshin.bridge import wraps_builtin

from chain.contracts.types import *


@wraps_builtin
def integer_to_byte_string(big_endian: bool, width: int, val: int) -> bytes:  # type: ignore[empty-body]
    """The UPLC builtin integerToByteString (Plutus V3)."""
    pass


@dataclass(unsafe_hash=True)
class ValueBox(PlutusData):
    """OpShin has no `==` on dicts; comparing boxed values is one equalsData."""

    CONSTR_ID = 0
    value: Dict[bytes, Dict[bytes, int]]


def count_signers(keys: List[bytes], signatories: List[bytes]) -> int:
    """How many of `keys` signed. Keys are distinct (config invariant), so none counts twice."""
    n = 0
    for k in keys:
        if k in signatories:
            n += 1
    return n


def strictly_increasing_hashes(keys: List[bytes]) -> bool:
    ok = True
    prev = b""
    for k in keys:
        ok = ok and len(k) == 28 and k > prev
        prev = k
    return ok


def valid_config(cfg: OracleConfigDatum) -> bool:
    return (
        strictly_increasing_hashes(cfg.oracles)
        and 1 <= cfg.threshold
        and cfg.threshold <= len(cfg.oracles)
        and strictly_increasing_hashes(cfg.admins)
        and 1 <= cfg.admin_threshold
        and cfg.admin_threshold <= len(cfg.admins)
        and len(cfg.batch_credential) == 28
    )


def oracle_set_hash(cfg: OracleConfigDatum) -> bytes:
    """The oracle set an escrow pins (`EscrowDatum.oracle_set`): blake2b-256 of the
    threshold as 8 big-endian bytes followed by the oracle key hashes, in the config's
    (strictly increasing) order. Admins and the batch credential are not part of it."""
    acc = integer_to_byte_string(True, 8, cfg.threshold)
    for k in cfg.oracles:
        acc = acc + k
    # OpShin compiles hashlib's blake2b(...).digest() to the blake2b_256 builtin.
    return blake2b(acc).digest()


def config_from(ref: TxInInfo, policy: bytes, name: bytes) -> OracleConfigDatum:
    """The configuration held by a reference input, authenticated by the config NFT and by
    its address: the NFT's policy is the oracle-config script itself (one script mints and
    holds it), so the input must sit at the script whose hash is the policy."""
    out = ref.resolved
    config_cred: Credential = ScriptCredential(policy)
    assert out.address.payment_credential == config_cred, "config not at the config script"
    assert out.value.get(policy, {b"": 0}).get(name, 0) == 1, "reference input lacks config NFT"
    d = out.datum
    assert isinstance(d, SomeOutputDatum), "config datum must be inline"
    cfg: OracleConfigDatum = d.datum
    return cfg


def upper_limit(r: TimeRange) -> int:
    """The finite upper bound of the validity range; infinite bounds are refused."""
    lim = r.upper_bound.limit
    assert isinstance(lim, Finite), "validity range needs a finite upper bound"
    return lim.time


def lower_limit(r: TimeRange) -> int:
    """The finite lower bound of the validity range; infinite bounds are refused."""
    lim = r.lower_bound.limit
    assert isinstance(lim, Finite), "validity range needs a finite lower bound"
    return lim.time


def withdraws_from(withdrawals: Dict[Credential, int], script_hash: bytes) -> bool:
    """Whether the transaction withdraws (any amount, usually zero) from the script's reward
    account. The ledger keys V3 withdrawals by a bare Credential."""
    key: Credential = ScriptCredential(script_hash)
    return withdrawals.get(key, -1) >= 0


def ntx_of(value: Dict[bytes, Dict[bytes, int]], policy: bytes, name: bytes) -> int:
    return value.get(policy, {b"": 0}).get(name, 0)
