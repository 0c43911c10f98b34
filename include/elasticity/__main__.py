"""`python -m elasticity ...` is the `elasticity` command; this file is also what spark-submit runs
(`spark-submit <package>/__main__.py run-batch --config FILE`): a file of the installed package,
so a wheel install needs nothing from the source tree."""

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: its folder on sys.path would shadow kafka, airflow, ... with ours
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from elasticity.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
