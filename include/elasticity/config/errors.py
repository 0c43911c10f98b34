"""What a bad configuration raises and warns."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration problem; the message names the key, the value and what is allowed."""


class ConfigWarning(UserWarning):
    """An unknown or deprecated key: the job runs, but what was meant may not be what was read."""
