"""MkDocs hook: the Configuration page's tables are committed (generated from the keys' declarations by
`python -m elasticity.config.reference --write`); the build fails when they differ from the declarations."""

from __future__ import annotations

from mkdocs.exceptions import PluginError


def on_page_markdown(markdown: str, page, config, files) -> str:
    from elasticity.config.reference import START, regenerate

    if START not in markdown:
        return markdown
    if regenerate(markdown) != markdown:
        raise PluginError(
            f"{page.file.src_uri}: the configuration reference differs from the key declarations; regenerate it with "
            "`.venv/bin/python -m elasticity.config.reference --write docs/reference/configuration.md`"
        )
    return markdown
