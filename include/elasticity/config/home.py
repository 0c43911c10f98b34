"""The state folder every default path lives under."""

from __future__ import annotations

import os
from pathlib import Path


def elasticity_home() -> Path:
    """`$ELASTICITY_HOME`, default `./.elasticity`, made absolute: read on each call, so a
    process that changes the variable (a test, the demo) sees its own folder."""
    return Path(os.environ.get("ELASTICITY_HOME", ".elasticity")).resolve()
