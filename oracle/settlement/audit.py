"""Read payouts back from the chain (never from the oracle's database): what each provider
address actually holds, and whether a settlement transaction's metadata and outputs agree
with its published bundle."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class Expected:
    """One attestation: its provider address is used by no other attestation."""

    escrow: str
    address: str
    amount: int


@dataclass(frozen=True)
class AuditResult:
    double_payments: int  # providers holding more than one payout's worth
    lost: int  # providers holding less than attested
    paid: int  # providers holding exactly what was attested
    details: tuple[str, ...]

    def line(self) -> str:
        return f"double_payments={self.double_payments} lost={self.lost}"


def ntx_balance(client: httpx.Client, url: str, address: str, unit: str) -> int:
    response = client.get(f"{url}/addresses/{address}")
    if response.status_code == 404:
        return 0
    response.raise_for_status()
    return sum(int(a["quantity"]) for a in response.json().get("amount", []) if a["unit"] == unit)


def audit_payouts(url: str, expected: Sequence[Expected], ntx_unit: str) -> AuditResult:
    """Compare each provider's confirmed NTX balance with its one attested amount."""
    double = lost = paid = 0
    details: list[str] = []
    with httpx.Client(timeout=30) as client:
        for e in expected:
            held = ntx_balance(client, url, e.address, ntx_unit)
            if held == e.amount:
                paid += 1
            elif held > e.amount:
                double += 1
                details.append(f"{e.escrow}: {e.address} holds {held}, attested {e.amount}")
            else:
                lost += 1
                details.append(f"{e.escrow}: {e.address} holds {held}, attested {e.amount}")
    return AuditResult(double, lost, paid, tuple(details))


def settlement_tx_of(url: str, escrow: str) -> str | None:
    """The confirmed transaction that spent `escrow` (None while unspent)."""
    tx_id, _, index = escrow.partition("#")
    response = httpx.get(f"{url}/txs/{tx_id}/utxos", timeout=30)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    for output in response.json()["outputs"]:
        if int(output["output_index"]) == int(index):
            spent = output.get("consumed_by_tx")
            return str(spent) if spent else None
    return None
