"""The configuration reference, rendered from each key's one declaration.

The documentation site's Configuration page is this text, made at build time, so
the reference cannot drift from what the loader accepts: names, defaults, allowed
values, the doc line and what Samza does with the same key.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from elasticity.config.job import KEYS
from elasticity.config.keys import SAME_AS_SAMZA, Key

SECTIONS: tuple[tuple[str, str], ...] = (  # first part of a key's name -> heading
    ("job", "The job, its containers and its outputs (`job.*`)"),
    ("task", "Tasks and checkpoints (`task.*`)"),
    ("batch", "Micro-batches (`batch.*`)"),
    ("processing", "Processing guarantees (`processing.*`)"),
    ("app", "The application (`app.*`)"),
    ("quality", "Data quality (`quality.*`)"),
    ("airflow", "Airflow (`airflow.*`)"),
    ("spark", "Spark (`spark.*`)"),
    ("stores", "State stores (`stores.*`)"),
    ("blob", "The blob store (`blob.*`)"),
    ("metrics", "Metrics (`metrics.*`)"),
    ("systems", "Systems: Kafka (`systems.*`)"),
    ("streams", "Streams (`streams.*`)"),
    ("serializers", "Serdes and the Schema Registry (`serializers.*`)"),
    ("outputs", "Typed outputs (`outputs.*`)"),
)


def _cell(text: str) -> str:
    """Plain text for a Markdown table cell: `<job>` stays visible, a `|` does not end the cell."""
    return html.escape(text, quote=False).replace("|", "\\|")


def anchor(k: Key) -> str:
    """The key's id on the page, so other pages link a key (`configuration.md#job.elasticity.factor`)."""
    return k.name.replace("<", "").replace(">", "")


def _name(k: Key) -> str:
    """The key as code that wraps only after a dot (a narrow column would cut `job.elasticity.factor` anywhere),
    and a link to itself."""
    code = "<code>" + ".<wbr>".join(html.escape(part) for part in k.name.split(".")) + "</code>"
    return f'<a id="{anchor(k)}" href="#{anchor(k)}">{code}</a>'


def _default(k: Key) -> str:
    if k.required:
        return "required"
    return "unset" if k.default is None else f"`{k.default}`"


def _samza(k: Key) -> str:
    if k.samza is None:
        return "this product's own"
    return "same key" if k.samza == SAME_AS_SAMZA else _cell(k.samza)


def _description(k: Key) -> str:
    notes = [f"Deprecated: use `{k.deprecated_for}`." if k.deprecated_for else "", "Masked wherever shown." if k.secret else ""]
    return " ".join(filter(None, [_cell(k.doc), *notes]))


def section_of(k: Key) -> str:
    first = k.name.split(".", 1)[0]
    if first not in dict(SECTIONS):
        raise ValueError(f"config key {k.name!r} starts with {first!r}, which no section of the reference covers")
    return first


def render(keys: Iterable[Key] = KEYS) -> str:
    """Markdown: one table per section, keys in declaration order; a cell says what is allowed and what Samza does."""
    by_section: dict[str, list[Key]] = {}
    for k in keys:
        by_section.setdefault(section_of(k), []).append(k)
    out = []
    for first, heading in SECTIONS:
        if first not in by_section:
            continue
        out += [f"## {heading}", "", "| key | default | meaning |", "| --- | --- | --- |"]
        out += [
            f"| {_name(k)} | {_default(k)} | {_description(k)}<br>**Allowed:** {_cell(k.parser.allowed)}<br>"
            f"**Samza:** {_samza(k)} |"
            for k in by_section[first]
        ]
        out.append("")
    return "\n".join(out)


START = "<!-- config-reference:start -->"
END = "<!-- config-reference:end -->"
PAGE = "docs/reference/configuration.md"


def regenerate(page: str) -> str:
    """`page` with the text between its START and END markers replaced by `render()`: the committed
    Configuration page, readable where the site is not built (on GitHub), made from the declarations."""
    if page.count(START) != 1 or page.count(END) != 1 or page.index(START) > page.index(END):
        raise ValueError(f"the page must hold {START} and then {END}, once each")
    head, rest = page.split(START)
    _, tail = rest.split(END)
    return f"{head}{START}\n\n{render()}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    """`python -m elasticity.config.reference --write [PAGE]`: regenerate the committed page in place;
    `--check [PAGE]`: exit 1 when it differs from what the declarations give."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m elasticity.config.reference", description=main.__doc__)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="regenerate the page in place")
    action.add_argument("--check", action="store_true", help="exit 1 when the page is out of date")
    parser.add_argument("page", nargs="?", default=PAGE, help=f"the Configuration page (default {PAGE})")
    args = parser.parse_args(argv)
    path = Path(args.page)
    old = path.read_text()
    new = regenerate(old)
    if args.write:
        if new != old:
            path.write_text(new)
        print(f"{path}: {'regenerated' if new != old else 'up to date'}")
        return 0
    if new != old:
        print(f"{path} is out of date: python -m elasticity.config.reference --write {path}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
