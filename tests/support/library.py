"""The library's source as the tests that read it (imports, dependencies) see it."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "include" / "elasticity"


def library_modules() -> dict[str, Path]:
    """Every module of the library by dotted name (a package by its own name), with its file."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out
