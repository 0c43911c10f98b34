"""The installed package as Airflow sees it, through Airflow's own commands in a fresh AIRFLOW_HOME: the
provider (`airflow providers list`), its connection types (`airflow providers hooks`), and the job page's
plugin with no file in the plugins folder (`airflow plugins`); with a copy of the plugin in the plugins folder
as well, Airflow still registers it once. Each command is a few seconds (Airflow's imports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.conftest import REPO

AIRFLOW = Path(sys.executable).parent / "airflow"
ENTRY_POINT = "elasticity.airflow.plugin:ElasticityPlugin"
SKIPPED = "Plugin 'elasticity' already registered, skipping"


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("provider")
    (home / "plugins").mkdir()
    return home


def _env(home: Path, plugins: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__CORE__PLUGINS")}
    return env | {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins),
        "ELASTICITY_JOBS_DIR": str(REPO / "include" / "jobs"),
        **extra,
    }


def _run(args: list[str], env: dict[str, str]):
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def _airflow(home: Path, *args: str, plugins: Path | None = None):
    return _run([str(AIRFLOW), *args, "-o", "json"], _env(home, plugins or home / "plugins"))


def test_airflow_lists_the_provider_and_its_connection_types(home):
    providers = {p["package_name"]: p for p in _airflow(home, "providers", "list")}
    assert providers["elasticity"]["version"] == version("elasticity")
    hooks = {h["connection_type"]: h for h in _airflow(home, "providers", "hooks")}
    assert (hooks["elasticity_kafka"]["class"], hooks["elasticity_kafka"]["hook_name"]) == (
        "elasticity.airflow.hooks.KafkaSystemHook",
        "Kafka (elasticity)",
    )
    assert hooks["elasticity_checkpoint_store"]["class"] == "elasticity.airflow.hooks.CheckpointStoreHook"
    assert {hooks[t]["package_name"] for t in ("elasticity_kafka", "elasticity_checkpoint_store")} == {"elasticity"}


def test_the_job_page_loads_with_no_file_in_the_plugins_folder(home):
    assert not any((home / "plugins").iterdir())
    [plugin] = [p for p in _airflow(home, "plugins") if p["name"] == "elasticity"]
    assert ENTRY_POINT in plugin["source"]
    assert [a["url_prefix"] for a in plugin["fastapi_apps"]] == ["/elasticity"]
    assert any(v["href"] == "elasticity/jobs/demo" for v in plugin["external_views"])


LOADED = """
import json
from airflow import plugins_manager
plugins, errors = plugins_manager._get_plugins()
print(json.dumps({"plugins": [[p.name, str(p.source)] for p in plugins], "errors": errors}))
"""


def test_a_plugins_folder_copy_and_the_package_give_one_plugin(home, tmp_path):
    """The project's plugins/ file, a user's copy of the plugin, the entry point and (providers discovered at
    once) the provider info all name the plugin `elasticity`: Airflow registers the first, the copy."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "elasticity_plugin.py").write_text((REPO / "plugins" / "elasticity_plugin.py").read_text())
    (folder / "job_page.py").write_text("from elasticity.airflow.plugin import ElasticityPlugin\n")
    env = _env(home, folder, AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS="False")
    loaded = _run([sys.executable, "-c", LOADED], env)
    ours = [source for name, source in loaded["plugins"] if name == "elasticity"]
    assert len(ours) == 1 and ours[0].endswith("job_page.py")
    assert {name for name, _ in loaded["plugins"]} - {"elasticity"} <= {"OpenLineageProviderPlugin"}  # a provider's own
    errors = set(loaded["errors"].values())
    assert SKIPPED in errors  # another provider's plugin met twice is noted the same way, and nothing else is
    assert errors - {SKIPPED} <= {"Plugin 'OpenLineageProviderPlugin' already registered, skipping"}
    assert "elasticity" in loaded["errors"]  # the provider info's plugin: offered, and skipped as a duplicate
