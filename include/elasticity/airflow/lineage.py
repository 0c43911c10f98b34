"""The operators' OpenLineage facets, for Airflow's OpenLineage provider (apache-airflow-providers-openlineage):
its listener calls an operator's `get_openlineage_facets_on_complete` when a task ends and sends the datasets
through the transport Airflow's `[openlineage]` section configures (HTTP to Marquez, Kafka, a file, the
console); with no transport configured the provider is off and nothing here runs.

The datasets are `elasticity.views.job_datasets`'s, named by OpenLineage's naming spec; a Parquet dataset
carries the schema facet of its columns. The micro-batch, rescale and replay operators report the same job:
`job_lineage` is what each returns."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from airflow.providers.common.compat.openlineage.facet import (
    Dataset,
    InputDataset,
    OutputDataset,
    SchemaDatasetFacet,
    SchemaDatasetFacetFields,
)
from airflow.providers.openlineage.extractors import OperatorLineage

from elasticity.config import JobConfig
from elasticity.views.job_datasets import Fields, JobDatasets, LineageDataset, job_datasets


def schema_facet(fields: Sequence[tuple[str, str]]) -> SchemaDatasetFacet:
    """OpenLineage's schema facet of (name, type) columns: a Parquet sink's, or a typed output's declared fields."""
    return SchemaDatasetFacet(fields=[SchemaDatasetFacetFields(name=name, type=type_) for name, type_ in fields])


def _facets(d: LineageDataset) -> dict:
    return {"schema": schema_facet(d.fields)} if d.fields else {}


def _inputs(ds: Iterable[LineageDataset]) -> list[Dataset]:
    return [InputDataset(namespace=d.namespace, name=d.name, facets=_facets(d)) for d in ds]


def _outputs(ds: Iterable[LineageDataset]) -> list[Dataset]:
    return [OutputDataset(namespace=d.namespace, name=d.name, facets=_facets(d)) for d in ds]


def operator_lineage(datasets: JobDatasets, *, outputs: bool = True) -> OperatorLineage:
    """`outputs` False: the inputs alone (a rescale reads the inputs' partitions, writes no record)."""
    return OperatorLineage(inputs=_inputs(datasets.inputs), outputs=_outputs(datasets.outputs) if outputs else [])


def job_lineage(config: JobConfig, *, outputs: bool = True, output_fields: dict[str, Fields] | None = None) -> OperatorLineage:
    """What an operator of the job (micro-batch, rescale, replay) returns from `get_openlineage_facets_on_*`;
    `output_fields`: typed Parquet outputs' declared (name, type) fields by output name (`fields_of`)."""
    return operator_lineage(job_datasets(config, output_fields=output_fields), outputs=outputs)
