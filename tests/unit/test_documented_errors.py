"""Every error message the troubleshooting page quotes is one the code prints: each literal piece of a quoted line
(between its `<placeholders>` and `[...]`) is in a string of the library's source, so a message reworded in the
code without its page fails here."""

from __future__ import annotations

import ast
import re

from tests.support.library import PACKAGE, REPO

PAGE = REPO / "docs" / "operating" / "troubleshooting.md"
# a config error is composed as "<key>=<value>: expected <what the key's parser allows> (<detail>)": its parts are
# checked apart
PLACEHOLDER = re.compile(r"<[^<>]+>|\[\.\.\.\]|\.\.\.|\bexpected |[()]")
SHORTEST = 4  # a shorter piece (": ", "; ") says nothing of which message it is


def _constants(tree: ast.Module) -> dict[str, str]:
    """A module's top-level names bound to a string, or to a tuple of strings (as `', '.join(NAME)` prints it)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if isinstance(value, str):
                out[node.targets[0].id] = value
            elif isinstance(value, tuple) and all(isinstance(v, str) for v in value):
                out[node.targets[0].id] = ", ".join(value)
    return out


def _rendered(node: ast.JoinedStr, constants: dict[str, str]) -> list[str]:
    """An f-string's literal parts, a part naming a module constant (`{NAME}`, `{', '.join(NAME)}`) printed into them."""
    parts, text = [], ""
    for value in node.values:
        if isinstance(value, ast.Constant):
            text += str(value.value)
            continue
        expr = value.value if isinstance(value, ast.FormattedValue) else value
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "join" and expr.args:
            expr = expr.args[0]
        if isinstance(expr, ast.Name) and expr.id in constants and getattr(value, "conversion", -1) == -1:
            text += constants[expr.id]
        else:
            parts.append(text)
            text = ""
    return [*parts, text]


def library_strings() -> list[str]:
    """The literal text of every string in the library: whole constants, and each literal part of an f-string."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        constants = _constants(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append(node.value)
            elif isinstance(node, ast.JoinedStr):
                found.extend(_rendered(node, constants))
    return found


def quoted_lines(page_text: str) -> list[str]:
    """The lines of the page's code blocks; an indented one (a detail of a multi-line error, quoting an example
    config's values) is left out."""
    lines, inside = [], False
    for line in page_text.splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside and line.strip() and not line.startswith(" "):
            lines.append(line)
    return lines


def pieces(line: str) -> list[str]:
    """The literal pieces of a quoted line, without the quotes a `!r` puts around a placeholder's value."""
    out = []
    for piece in PLACEHOLDER.split(line):
        piece = piece.strip("'\" :;,()")
        if len(piece.strip()) >= SHORTEST:
            out.append(piece)
    return out


def test_pieces_split_at_placeholders():
    line = "job '<job>' is leased by '<owner>' for another <s>s (a batch); expected 1"
    assert pieces(line) == ["is leased by", "for another", "a batch"]


def test_every_quoted_message_is_printed_by_the_code():
    strings = library_strings()
    missing = [
        f"{line!r}: {piece!r}"
        for line in quoted_lines(PAGE.read_text())
        for piece in pieces(line)
        if not any(piece in s for s in strings)
    ]
    assert missing == []
