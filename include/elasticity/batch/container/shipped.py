"""In a Python worker: the user's code comes from the archives the driver shipped this batch
(`elasticity.spark.shipping`), not from an older copy. A reused worker keeps its imported modules; when the
app changed, the new archive (a new name) is on its path too, so the modules an archive provides that were
imported from elsewhere are dropped and imported again from it. Nothing here imports Spark."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

Shipped = tuple[tuple[str, tuple[str, ...]], ...]  # (archive name, its top-level modules), first wins


def _loaded_from(module: ModuleType, entry: str) -> bool:
    where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", [])), None)
    return where is not None and os.path.abspath(where).startswith(os.path.abspath(entry) + os.sep)


def prefer_shipped(shipped: Shipped, path: list[str] | None = None) -> bool:
    """Put each shipped archive found on `path` (sys.path) first, in the order given, and drop the modules it
    provides that came from elsewhere; True when some were dropped (what was built from them is stale)."""
    path = sys.path if path is None else path
    dropped = False
    for name, modules in reversed(shipped):
        entry = next((p for p in path if os.path.basename(p) == name), None)
        if entry is None:  # not on this worker's path (yet): nothing to prefer
            continue
        if path[0] != entry:
            path.remove(entry)
            path.insert(0, entry)
        for top in modules:
            module = sys.modules.get(top)
            if module is not None and not _loaded_from(module, entry):
                for m in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
                    del sys.modules[m]
                dropped = True
    if dropped:
        importlib.invalidate_caches()
    return dropped
