"""Example counts of the property tests that set their own (a state machine, a test with real stores)."""

from __future__ import annotations

from hypothesis import settings

FULL = 100  # max_examples of the `default` profile (tests/conftest.py), the count the tests were sized for


def examples(full: int) -> int:
    """`full` under the default and ci profiles; the `unit` profile (`make unit`) cuts it in the
    proportion it cuts the others, never below 2."""
    return min(full, max(2, full * settings.default.max_examples // FULL))
