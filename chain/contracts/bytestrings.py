"""Bytestring and signature builtins for validators that read signed bytes (on-chain helper).

The UPLC builtins themselves (`opshin.bridge.wraps_builtin`, as in `opshin.std.builtins`),
declared one by one: a star import of `opshin.std.builtins` compiles every wrapper in.
"""

from opshin.bridge import wraps_builtin

from chain.contracts.rules import *


@wraps_builtin
def append_byte_string(x: bytes, y: bytes) -> bytes:
    pass


@wraps_builtin
def cons_byte_string(x: int, y: bytes) -> bytes:
    pass


@wraps_builtin
def slice_byte_string(x: int, y: int, z: bytes) -> bytes:
    pass


@wraps_builtin
def index_byte_string(x: bytes, y: int) -> int:
    pass


@wraps_builtin
def blake2b_224(a: bytes) -> bytes:
    pass


@wraps_builtin
def verify_ed25519_signature(pk: bytes, m: bytes, s: bytes) -> bool:
    pass
