"""Slots and POSIX time on the backend's chain (validity intervals are slots; scripts see ms)."""

from __future__ import annotations

from dataclasses import dataclass

from pycardano import ChainContext


@dataclass(frozen=True)
class ChainClock:
    """Shelley-era slot arithmetic: slot 0 starts at `system_start` (POSIX seconds)."""

    system_start: int
    slot_length: int

    @classmethod
    def of(cls, context: ChainContext) -> ChainClock:
        genesis = context.genesis_param
        return cls(int(genesis.system_start), int(genesis.slot_length))

    def posix_ms(self, slot: int) -> int:
        """The POSIX time (ms) a script sees for a validity bound at `slot`."""
        return (self.system_start + slot * self.slot_length) * 1000

    def slot_at_or_before(self, posix_ms: int) -> int:
        """The last slot whose time is <= `posix_ms` (an upper bound that respects it)."""
        return (posix_ms // 1000 - self.system_start) // self.slot_length

    def slot_after(self, posix_ms: int) -> int:
        """The first slot whose time is strictly after `posix_ms` (a lower bound past it)."""
        return self.slot_at_or_before(posix_ms) + 1


def tip_slot(context: ChainContext) -> int:
    return int(context.last_block_slot)


def tip_posix_ms(context: ChainContext) -> int:
    """Chain time now, as scripts will see it (the tip's slot)."""
    return ChainClock.of(context).posix_ms(tip_slot(context))
