"""Great Expectations suites over the tables of `checks`, with Data Docs.

One expectation per invariant, each on its own table, run through a GX
Checkpoint that renders Data Docs into the report folder. A failed expectation
is reported with the records it caught, so the run's error names the keys and
offsets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from elasticity.quality import checks
from elasticity.quality.offline_docs import make_offline

SITE = "elasticity_dq"


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    table: Callable[[checks.QualityInputs], pd.DataFrame]
    expectation: Callable[[], object]
    describe: str
    asset: str  # what the table holds: the data asset's name in Data Docs
    applies: Callable[[checks.QualityInputs], bool] = lambda q: True


def _expectations():
    import great_expectations.expectations as gxe

    return [
        Check(
            name="no_loss",
            table=checks.loss_table,
            expectation=lambda: gxe.ExpectColumnValuesToBeInSet(column="audited", value_set=[True]),
            describe="every input record below the committed checkpoints was processed (audited)",
            asset="input records x audit",
        ),
        Check(
            name="no_declared_loss",
            table=checks.lost_table,
            expectation=lambda: gxe.ExpectColumnValuesToBeInSet(column="processed", value_set=[True]),
            describe="no input record was removed from its log before it was processed (a range a batch declared lost "
            "under task.input.truncation.policy=skip-to-earliest is named here)",
            asset="ranges declared lost",
        ),
        Check(
            name="key_order",
            table=checks.order_table,
            expectation=lambda: gxe.ExpectColumnValuesToBeInSet(column="in_order", value_set=[True]),
            describe="per key, processing order follows offset order, across batches and rescales",
            asset="audit rows by key",
        ),
        Check(
            name="routing",
            table=checks.routing_table,
            expectation=lambda: gxe.ExpectColumnValuesToBeBetween(column="tasks_per_key", min_value=1, max_value=1),
            describe="within a generation every key was handled by exactly one virtual task",
            asset="virtual tasks per key",
        ),
        Check(
            name="audit_unique",
            table=checks.audit_table,
            expectation=lambda: gxe.ExpectCompoundColumnsToBeUnique(column_list=["stream", "partition", "offset"]),
            describe="no input record was processed twice",
            asset="audit rows",
        ),
        Check(
            name="sink_unique",
            table=checks.sink_table,
            expectation=lambda: gxe.ExpectCompoundColumnsToBeUnique(column_list=["output", "source_partition", "source_offset"]),
            describe="no input record appears twice in the exactly-once sink",
            asset="sink rows",
        ),
        Check(
            name="state",
            table=checks.state_table,
            expectation=lambda: gxe.ExpectColumnValuesToBeInSet(column="matches", value_set=[True]),
            describe="every stored value equals the aggregate recomputed from the processed input below the checkpoints",
            asset="stored keys",
            applies=lambda q: q.state is not None,
        ),
        Check(
            name="kafka_unique",
            table=checks.kafka_unique_table,
            expectation=lambda: gxe.ExpectCompoundColumnsToBeUnique(
                column_list=["output", "source_system", "source_stream", "source_partition", "source_offset", "nth"]
            ),
            describe="no input record's output appears twice in an exactly-once Kafka output, read read_committed",
            asset="Kafka output records by input record",
            applies=lambda q: q.kafka is not None,
        ),
        Check(
            name="kafka_key_order",
            table=checks.kafka_order_table,
            expectation=lambda: gxe.ExpectColumnValuesToBeInSet(column="in_order", value_set=[True]),
            describe="per key, an exactly-once Kafka output's records follow their input records' order",
            asset="Kafka output records by key",
            applies=lambda q: q.kafka is not None,
        ),
        Check(
            name="kafka_no_loss",
            table=checks.kafka_loss_table,
            expectation=lambda: gxe.ExpectColumnValuesToBeInSet(column="complete", value_set=[True]),
            describe="every committed batch's Kafka outputs are visible read_committed, as many as its commit record counts",
            asset="committed batches x Kafka outputs",
            applies=lambda q: q.kafka is not None,
        ),
    ]


@dataclass(kw_only=True)
class CheckResult:
    name: str
    describe: str
    expectation: str
    success: bool
    rows: int
    unexpected: int
    examples: list[str] = field(default_factory=list)


@dataclass
class QualityResult:
    checks: list[CheckResult]
    data_docs: str

    @property
    def success(self) -> bool:
        return all(c.success for c in self.checks)

    def failure_message(self) -> str:
        return "; ".join(
            f"{c.name} ({c.expectation}) failed for {c.unexpected} of {c.rows} rows, e.g. {', '.join(c.examples[:5])}"
            for c in self.checks
            if not c.success
        )


def run_suites(q: checks.QualityInputs, report_dir: str | Path, job: str, *, run_name: str, window: str) -> QualityResult:
    """Validate every check; Data Docs name each validation after the run and its window, and
    each data asset after the job and the table checked, and open offline (`offline_docs`)."""
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.base import ProgressBarsConfig

    root = Path(report_dir)
    root.mkdir(parents=True, exist_ok=True)
    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)  # task logs carry the results, not tqdm bars
    docs = root / "data_docs"
    ctx.add_data_docs_site(
        site_name=SITE,
        site_config={
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs)},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        },
    )
    source = ctx.data_sources.add_pandas(job)
    run_id = RunIdentifier(run_name=f"{run_name} {window}".strip(), run_time=datetime.now(UTC))
    results = []
    for check in (c for c in _expectations() if c.applies(q)):
        table = check.table(q).reset_index(drop=True)  # GX names failing rows by index label: make labels positions
        asset = check.asset
        batch = source.add_dataframe_asset(asset).add_batch_definition_whole_dataframe("all")
        suite = ctx.suites.add(gx.ExpectationSuite(name=check.name, expectations=[check.expectation()]))
        vd = ctx.validation_definitions.add(gx.ValidationDefinition(name=check.name, data=batch, suite=suite))
        cp = ctx.checkpoints.add(
            gx.Checkpoint(
                name=f"{check.name}_checkpoint", validation_definitions=[vd], result_format={"result_format": "COMPLETE"}
            )
        )
        outcome = cp.run(batch_parameters={"dataframe": table}, run_id=run_id)
        ((key, run),) = outcome.run_results.items()
        # the page header reads it here; GX types it BatchSpec (a dict subclass): kept the plain dict it always was
        run.meta["batch_spec"] = {**run.meta.get("batch_spec", {}), "data_asset_name": asset}  # type: ignore[arg-type]  # GX types it as its own dict subclass; it stores this plain dict as is
        ctx.validation_results_store.set(key, run)
        (r,) = run.results
        assert r.expectation_config is not None  # a result carries the expectation it checked
        index = r.result.get("unexpected_index_list") or []
        positions = [i if isinstance(i, int) else next(iter(i.values())) for i in index]
        examples = [str(table["record"].iloc[i]) for i in positions[:20] if isinstance(i, int) and i < len(table)]
        results.append(
            CheckResult(
                name=check.name,
                describe=check.describe,
                expectation=r.expectation_config.type,
                success=bool(r.success),
                rows=len(table),
                unexpected=int(r.result.get("unexpected_count") or 0),
                examples=examples,
            )
        )
    ctx.build_data_docs(site_names=[SITE])
    make_offline(docs)
    return QualityResult(results, str(docs / "index.html"))
