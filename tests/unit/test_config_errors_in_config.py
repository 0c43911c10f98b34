"""A configuration is refused in `elasticity.config`: its parsers, cross-key rules and the rules on what a config
cannot hold (`runtime_rules`: the app's declarations, the Spark master, a rescale's factor, the deployment's
settings). Outside it, a module raises ConfigError only for a fact it alone has at run time; each is listed
below with that fact, and the list may only shrink. Read from the source (ast), like the function-length test."""

from __future__ import annotations

import ast

from tests.support.library import library_modules

RAISED_AT_RUN_TIME = {
    "elasticity.kafka.admin": "the TLS files are read when a client connects: a certificate missing or unreadable on "
    "this host is only known then",
    "elasticity.spark.shipping": "spark.submit.pyFiles are read on the driver when the library is shipped: whether "
    "each is a file there is known on that host only",
    "elasticity.batch.coordinator.job_coordinator": "checkpoints imported (a file, Samza's checkpoint topic) are "
    "checked against the job model the broker's partition counts give: neither is in the config",
    "elasticity.checkpoint.task_ownership": "the same check of imported checkpoints (which task owns which input "
    "partitions and changelog partition), against that job model",
}


def raising_modules() -> dict[str, int]:
    """Modules outside `elasticity.config` by how many `raise ConfigError` they hold."""
    found: dict[str, int] = {}
    for name, path in library_modules().items():
        if name == "elasticity.config" or name.startswith("elasticity.config."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id == "ConfigError":
                    found[name] = found.get(name, 0) + 1
    return found


def test_config_errors_are_raised_in_config_or_for_a_run_time_fact_named_here():
    found = raising_modules()
    unlisted = sorted(set(found) - set(RAISED_AT_RUN_TIME))
    assert not unlisted, f"ConfigError raised outside elasticity.config (move the check into config/): {unlisted}"
    stale = sorted(set(RAISED_AT_RUN_TIME) - set(found))
    assert not stale, f"no longer raise ConfigError, drop from RAISED_AT_RUN_TIME: {stale}"
