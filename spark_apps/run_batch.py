"""spark-submit entry point: one micro-batch of a job.

spark-submit spark_apps/run_batch.py --config include/jobs/demo.properties [--max-records N] [--until-caught-up]

Thin: the session spark-submit created is used as it is; everything else is the library. The
micro-batch operator submits the package's own entry file instead (`elasticity/__main__.py
run-batch ...`), which an installed library has wherever it is installed.
"""

import sys

from elasticity.cli import main

if __name__ == "__main__":
    sys.exit(main(["run-batch", *sys.argv[1:]]))
