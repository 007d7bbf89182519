"""List builtins for walking ledger lists once, front to back (on-chain helper module).

OpShin compiles `xs[i]` to an O(i) walk and copies a `List[...]` field on every read, so a
batch that indexes inputs and outputs per escrow is O(N^2). These are the UPLC builtins
themselves (`opshin.bridge.wraps_builtin`, as in `opshin.std.builtins`), typed over one
field-less record `Elem`: OpShin inserts no conversion for lists of records, and a caller
casts each element it reads (`x: TxOut = head_list(xs)`), which costs nothing. Reading an
element as the wrong type fails on its first field access, as any mistyped datum does.
"""

from opshin.bridge import wraps_builtin

from chain.contracts.rules import *


@dataclass(unsafe_hash=True)
class Elem(PlutusData):
    """Placeholder element type of a walked list."""

    CONSTR_ID = 0


@wraps_builtin
def un_list_data(x: Anything) -> List[Elem]:
    """The builtin list inside a list datum (fails on any other datum)."""
    pass


@wraps_builtin
def head_list(xs: List[Elem]) -> Anything:
    """First element (fails on the empty list)."""
    pass


@wraps_builtin
def tail_list(xs: List[Elem]) -> List[Elem]:
    """All but the first element (fails on the empty list)."""
    pass


@wraps_builtin
def null_list(xs: List[Elem]) -> bool:
    pass


def drop_list(xs: List[Elem], n: int) -> List[Elem]:
    """`xs` without its first `n` elements (n >= 0)."""
    if n > 0:
        return drop_list(tail_list(xs), n - 1)
    return xs
