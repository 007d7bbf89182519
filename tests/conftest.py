"""Root conftest: registers the shared fixture plugins.

Kept generic on purpose; role-specific fixtures live beside their tests and are registered
here as plugins.
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent
_REPO = _TESTS.parent

# pytest puts tests/ on sys.path to import this file; its tests/chain, tests/api, ... folders
# (no __init__.py) would then shadow the real packages as namespace packages unless the
# repository root is importable too (a regular package always wins over a namespace one).
if str(_REPO) not in sys.path:
    sys.path.append(str(_REPO))
# Likewise tests/pot must not shadow the proof-of-training library (libs/pot/pot).
if str(_REPO / "libs" / "pot") not in sys.path:
    sys.path.append(str(_REPO / "libs" / "pot"))

# Fixture plugins are plain modules beside their tests (there are no __init__.py files under
# tests/), so their directories go on sys.path before pytest imports them by name.
for _plugin_dir in (_TESTS / "chain" / "devnet",):
    if str(_plugin_dir) not in sys.path:
        sys.path.insert(0, str(_plugin_dir))

pytest_plugins = ["devnet_fixtures"]
