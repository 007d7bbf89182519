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


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Modules holding a slow scenario run first, each module kept whole.

    Under `pytest -n 2 --dist loadscope` a module goes to one worker (its module fixtures,
    a devnet or a whole loop, are built once, not once per worker), and the longest
    modules start while the short ones fill the other worker, instead of one of them
    starting last and running alone at the end.
    """

    def module(item):  # type: ignore[no-untyped-def]
        return item.nodeid.split("::", 1)[0]

    slow_modules = {module(item) for item in items if item.get_closest_marker("slow")}
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        first_seen.setdefault(module(item), index)
    items.sort(key=lambda item: (module(item) not in slow_modules, first_seen[module(item)]))
