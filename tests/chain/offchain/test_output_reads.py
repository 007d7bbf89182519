"""Reading an output by reference on each backend (`chain.offchain.output_reads`): Ogmios
without Kupo cannot tell a spent escrow from a missing one, so every reader says which
setting to set instead of answering "missing"."""

from __future__ import annotations

import pytest
from pycardano import Network

from api.services.payable_escrow import EscrowBackendError, lookup
from chain.offchain.backends import ogmios_context
from chain.offchain.builders.errors import BuilderError
from chain.offchain.errors import BackendConfigError
from chain.offchain.output_reads import output_facts
from oracle.settlement.ports import OutRef
from oracle.settlement.slash import read_escrow

TX = "ab" * 32


def test_ogmios_without_kupo_names_the_setting_everywhere() -> None:
    context = ogmios_context("ws://127.0.0.1:1337", Network.TESTNET)
    with pytest.raises(BackendConfigError, match="PROOFNET_KUPO_URL"):
        output_facts(context, TX, 0)
    with pytest.raises(EscrowBackendError, match="PROOFNET_KUPO_URL"):
        lookup(context, TX, 0)
    with pytest.raises(BuilderError, match="PROOFNET_KUPO_URL"):
        read_escrow(context, OutRef(TX, 0))


def test_a_context_that_reads_no_outputs_is_refused() -> None:
    with pytest.raises(BackendConfigError, match="cannot read outputs"):
        output_facts(object(), TX, 0)
