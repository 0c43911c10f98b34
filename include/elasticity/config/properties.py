"""Java `.properties` text as Samza reads it, before any key is known."""

from __future__ import annotations

import re
from pathlib import Path

from elasticity.config.errors import ConfigError

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(value: str) -> str:
    """java.util.Properties escapes: `\\\\` is one backslash, `\\t` a tab, `\\uXXXX` a character, `\\x` is x."""
    return re.sub(
        r"\\(u[0-9a-fA-F]{4}|.)",
        lambda m: chr(int(m[1][1:], 16)) if len(m[1]) == 5 else _ESCAPES.get(m[1], m[1]),
        value,
    )


def parse_properties(text: str) -> dict[str, str]:
    """Java `.properties` lines, as Samza reads them: `key=value` or `key: value`,
    `#`/`!` comments, a line ending in an odd number of `\\` continues, escapes in values."""
    props: dict[str, str] = {}
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        if (len(stripped) - len(stripped.rstrip("\\"))) % 2 == 1:
            pending += stripped[:-1]
            continue
        logical, pending = pending + stripped, ""
        m = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", logical)
        if not m:
            raise ConfigError(f"line {logical!r} is not key=value")
        props[m.group(1)] = _unescape(m.group(2).strip())
    return props


def read_properties(path: Path) -> dict[str, str]:
    """A `.properties` file's keys; a ConfigError naming the file, and the line or byte, when it cannot be read."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}: {e.object[e.start : e.start + 1]!r})") from e
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e
    try:
        return parse_properties(text)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from e
