"""The generated configuration reference names every key the product reads, once, and the committed page
(docs/reference/configuration.md) is what the declarations give."""

from __future__ import annotations

import ast
import re

import pytest

from elasticity.config.job import KEYS, find_key
from elasticity.config.kafka_clients import PROPERTIES
from elasticity.config.keys import Key
from elasticity.config.parsers import nonempty
from elasticity.config.reference import END, START, anchor, main, regenerate, render
from tests.conftest import REPO
from tests.support.library import PACKAGE

KEY_LIKE = re.compile(
    r"^(job|task|systems|stores|metrics|batch|app|airflow|spark|blob|quality|serializers|streams)\.[a-z0-9._-]*[a-z0-9_-]$"
)
NOT_KEYS = {"airflow.plugins"}  # the entry-point group Airflow loads plugins from


def _plain(text: str) -> str:
    """The page as a reader sees the key cells: no anchors, no break hints, brackets as brackets."""
    text = re.sub(r'<a id="[^"]*" href="#[^"]*">(.*?)</a>', r"\1", text)
    return text.replace("<wbr>", "").replace("&lt;", "<").replace("&gt;", ">")


def test_every_declared_key_has_one_row_with_its_own_anchor():
    text = render()
    for k in KEYS:
        assert _plain(text).count(f"| <code>{k.name}</code> |") == 1, k.name
        assert text.count(f'<a id="{anchor(k)}" href="#{anchor(k)}">') == 1, k.name
    assert len({anchor(k) for k in KEYS}) == len(KEYS)


def test_a_row_says_default_allowed_values_and_samza():
    rows = {_plain(line).split(" | ")[0]: line for line in render().splitlines()}
    row = rows["| <code>job.elasticity.factor</code>"]
    assert "| `1` |" in row and "**Allowed:** an integer from 1 to 256" in row
    assert "xxhash64" in row  # the deliberate difference from Samza's bucket
    assert "**Samza:** same key" in rows["| <code>stores.<store>.changelog</code>"]


def test_angle_brackets_and_pipes_in_text_stay_visible():
    row = render([Key(name="job.x", parser=nonempty, default=None, doc="a <job> | b")]).splitlines()[-1]
    assert "a &lt;job&gt; \\| b" in row


def test_a_key_outside_every_section_fails_the_build():
    with pytest.raises(ValueError, match="'nosuch'"):
        render([Key(name="nosuch.key", parser=nonempty, default=None, doc="x")])


def _string_constants() -> dict[str, str]:
    """Every string literal of the library shaped like a config key, with the module it is in."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        tails = {id(n.right) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add)}
        tails |= {  # a fault point's name (`faults.point("quality.state.pinned")`) is no key
            id(a)
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "point"
            for a in n.args
        }
        for node in ast.walk(tree):
            if id(node) in tails:  # the end of a name built from a prefix (`pre + "blob.retain"`), a fault point
                continue
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and KEY_LIKE.match(node.value)
                and node.value not in NOT_KEYS
                and not node.value.endswith(".tmpl")  # `elasticity init`'s templates
            ):
                found[node.value] = str(path.relative_to(PACKAGE))
    return found


def test_every_key_the_library_reads_is_declared():
    """A key read by name anywhere in the library is a declared key (so it is in the reference); Kafka's own
    client property names (passed through under systems.<system>.<client>.) are not keys of their own."""
    kafka_properties = {p.name for p in PROPERTIES}
    undeclared = {
        name: where
        for name, where in _string_constants().items()
        if find_key(name) is None and name not in kafka_properties and not name.startswith("spark.")
    }
    assert not undeclared, f"read but not declared (add them to elasticity.config): {undeclared}"


PAGE = REPO / "docs" / "reference" / "configuration.md"


def test_the_committed_page_is_what_the_declarations_give():
    page = PAGE.read_text()
    assert regenerate(page) == page, (
        "docs/reference/configuration.md drifted from the key declarations: "
        ".venv/bin/python -m elasticity.config.reference --write docs/reference/configuration.md"
    )
    for k in KEYS:
        assert f'<a id="{anchor(k)}" href="#{anchor(k)}">' in page, k.name


def test_check_fails_on_a_drifted_page_and_write_mends_it(tmp_path, capsys):
    page = tmp_path / "configuration.md"
    page.write_text(PAGE.read_text().replace("| `1` |", "| `2` |", 1))  # a default edited by hand
    assert main(["--check", str(page)]) == 1
    assert main(["--write", str(page)]) == 0
    assert page.read_text() == PAGE.read_text()
    assert main(["--check", str(page)]) == 0


def test_a_page_without_its_markers_is_refused():
    with pytest.raises(ValueError, match="config-reference"):
        regenerate(f"# Configuration\n{END}\n{START}\n")
