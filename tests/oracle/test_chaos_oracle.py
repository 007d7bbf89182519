"""`proofnet chaos oracle`: the oracle SIGKILLed at random points (and right after it logged
"submitting") 20 times over a real devnet; the chain shows every attestation paid once."""

from __future__ import annotations

from pathlib import Path

import pytest

from oracle.settlement.chaos import run_chaos


@pytest.mark.slow
def test_sigkill_twenty_times_never_pays_twice_or_loses(tmp_path: Path) -> None:
    report = run_chaos(20, workdir=tmp_path, seed=20240611, echo=False)
    assert report.escrows >= 20
    assert report.kills_after_submitting >= 3
    assert report.audit.details == ()
    assert (report.audit.double_payments, report.audit.lost) == (0, 0)
    assert report.audit.paid == report.escrows
    assert report.line() == "double_payments=0 lost=0"
