"""The CLI's pure paths (no broker): job-model from given partition counts."""

import json

import pytest

from elasticity.cli import main
from tests.conftest import REPO
from tests.unit.test_grouping import SAMZA71_COGROUP, SAMZA71_MAX

EXAMPLES = REPO / "include/jobs/examples"
DEMO = str(REPO / "include/jobs/demo.properties")


def _as_seed(table: str) -> str:
    return "\n".join(line.replace(" - Partition ", " - StreamTask:") for line in table.strip().splitlines())


def test_job_model_table_reproduces_samza71_max(capsys):
    assert (
        main(
            [
                "job-model",
                "--config",
                f"{EXAMPLES}/samza71-max.properties",
                "--partitions",
                "kafka.IS1=4",
                "kafka.IS2=8",
                "--format",
                "table",
            ]
        )
        == 0
    )
    assert _as_seed(capsys.readouterr().out) == SAMZA71_MAX.strip()


def test_job_model_table_reproduces_samza71_cogroup(capsys):
    args = [
        "job-model",
        "--config",
        f"{EXAMPLES}/samza71-cogroup.properties",
        "--partitions",
        "kafka.IS1=8",
        "kafka.IS2=12",
        "--format",
        "table",
    ]
    assert main(args) == 0
    assert _as_seed(capsys.readouterr().out) == SAMZA71_COGROUP.strip()


def test_job_model_json_has_samza_shape(capsys):
    assert main(["job-model", "--config", DEMO, "--partitions", "kafka.orders=4"]) == 0
    captured = capsys.readouterr()
    model = json.loads(captured.out)
    assert model["config"]["job.elasticity.factor"] == "2"
    tasks = {n: t for c in model["containers"].values() for n, t in c["tasks"].items()}
    assert len(tasks) == 8 and "Partition_3-1-2" in tasks
    assert all(c["processor-id"] == cid for cid, c in model["containers"].items())
    assert "job-model-generation-ns=" in captured.err and "task-count=8" in captured.err


def test_bad_config_exits_2_naming_the_key(tmp_path, capsys):
    bad = tmp_path / "bad.properties"
    bad.write_text("job.name=x\ntask.inputs=kafka.t\njob.elasticity.factor=0\n")
    assert main(["job-model", "--config", str(bad), "--partitions", "kafka.t=2"]) == 2
    err = capsys.readouterr().err
    assert "job.elasticity.factor='0'" in err and "an integer from 1 to 256" in err


def test_bad_partitions_argument(capsys):
    assert main(["job-model", "--config", DEMO, "--partitions", "kafka.orders"]) == 2
    assert "SYSTEM.STREAM=N" in capsys.readouterr().err


def test_repeated_partitions_flags_accumulate(capsys):
    config = f"{EXAMPLES}/samza71-max.properties"
    assert (
        main(["job-model", "--config", config, "--partitions", "kafka.IS1=4", "--partitions", "kafka.IS2=8", "--format", "table"])
        == 0
    )
    assert _as_seed(capsys.readouterr().out) == SAMZA71_MAX.strip()


def test_strict_flag_makes_unknown_keys_errors(tmp_path, capsys):
    typo = tmp_path / "typo.properties"
    typo.write_text("job.name=x\ntask.inputs=kafka.t\njob.elasticity.factr=4\n")
    assert main(["job-model", "--config", str(typo), "--partitions", "kafka.t=2", "--strict"]) == 2
    err = capsys.readouterr().err
    assert "'job.elasticity.factr'" in err and "did you mean 'job.elasticity.factor'" in err


@pytest.mark.parametrize("value", ["0", "-5", "x"])
def test_max_records_below_1_is_rejected_naming_the_flag(value, capsys):
    with pytest.raises(SystemExit) as e:
        main(["run-batch", "--config", DEMO, "--max-records", value])
    assert e.value.code == 2
    assert f"--max-records {value!r}: expected an integer >= 1" in capsys.readouterr().err


def test_a_command_missing_its_extra_says_which_to_install(capsys, monkeypatch):
    """With the core alone (`pip install elasticity`), a command of an extra names the extra, not a traceback."""
    import tomllib

    from elasticity import cli
    from elasticity.cli import stack_commands

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(cli.EXTRA_OF.values()) <= set(extras)

    def missing(args):
        raise ModuleNotFoundError("No module named 'requests'", name="requests")

    monkeypatch.setattr(stack_commands, "cmd_demo", missing)
    assert main(["demo"]) == 2
    assert (
        "`elasticity demo` needs requests, which is not installed: pip install 'elasticity[airflow]'" in capsys.readouterr().err
    )


def test_airflow_on_the_local_cluster_without_one_running_says_how_to_start_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ELASTICITY_HOME", str(tmp_path))
    assert main(["airflow", "--cluster"]) == 2
    assert f"no local cluster runs for {tmp_path}: start one with `make cluster`" in capsys.readouterr().err


def test_a_missing_module_outside_the_extra_is_not_blamed_on_it(monkeypatch):
    """A module the command's extra does not install (one a user's app imports, say) is not 'pip install
    elasticity[spark]': the error is left as it is (a missing app module itself is named by app.class)."""
    from elasticity.cli import stack_commands

    def missing(args):
        raise ModuleNotFoundError("No module named 'httpx'", name="httpx")

    monkeypatch.setattr(stack_commands, "cmd_demo", missing)
    with pytest.raises(ModuleNotFoundError, match="httpx"):
        main(["demo"])
