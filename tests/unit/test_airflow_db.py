"""`elasticity airflow --db`: which metadata database and executor Airflow gets, and
the clear error for anything else (no server is contacted here)."""

import pytest

from elasticity.cli import build_parser
from elasticity.local.standalone import LOCAL_POSTGRES, AirflowDb, MetadataDbError, airflow_db


def test_sqlite_is_airflows_own_default():
    db = airflow_db("sqlite")
    assert db == AirflowDb() and db.env() == {} and db.store_url is None


def test_postgres_is_two_databases_of_the_project_on_the_local_server_with_the_local_executor():
    db = airflow_db("postgres")
    assert db.metadata_url == f"{LOCAL_POSTGRES}/elasticity_airflow" and db.store_url == f"{LOCAL_POSTGRES}/elasticity"
    assert db.env() == {
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db.metadata_url,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": db.metadata_url,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
    }
    assert airflow_db("postgresql+psycopg://u:pw@db:5432").store_url == "postgresql+psycopg://u:pw@db:5432/elasticity"


@pytest.mark.parametrize("choice", ["mysql", "postgres://h:5432", "postgresql+psycopg://h:5432/mine", ""])
def test_anything_else_names_the_value_and_the_choices(choice):
    with pytest.raises(MetadataDbError, match=r"--db .*allowed are sqlite, postgres or a server URL"):
        airflow_db(choice)


def test_database_names_are_checked():
    with pytest.raises(MetadataDbError, match="database name 'Air-flow'"):
        airflow_db("postgres", metadata_database="Air-flow")


def test_the_command_line_takes_the_choice():
    args = build_parser().parse_args(["airflow", "--db", "postgres", "--spark-remote", "sc://h:15002"])
    assert (args.db, args.spark_remote, args.init_only) == ("postgres", "sc://h:15002", False)
    assert build_parser().parse_args(["airflow"]).db == "sqlite"
