"""Where the vendored reference fixtures are: importable by any test module.

`tests/fixtures/` holds copies of the read-only reference material the suite checks against
(the ledger's Plutus V3 script-context vectors and Blockfrost's OpenAPI spec; origin and
licence in each folder's README), so the suite runs on a clone with nothing beside it.
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LEDGER_VECTORS = FIXTURES / "ledger" / "script_context_v3"
BLOCKFROST_OPENAPI = FIXTURES / "blockfrost" / "openapi.yaml"
