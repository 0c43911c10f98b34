"""`/elasticity/metrics`: the jobs' metrics for Prometheus, served by the job page's app in Airflow's API server.

Each scrape reads every job the caller may see (`elasticity.views.job_sample`) through the process's stores
(one engine per store URL, the page's `StorePool`) and, per job, Kafka clients kept open across scrapes (a
new client per scrape would cost more than the lag probe itself); the samples become metric families in
`elasticity.metrics.exposition`'s collector, rendered by prometheus-client in the format the scraper asks
for (Prometheus' text format, or OpenMetrics). Scrapes are served one at a time: the held clients are not
shared between threads."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from pathlib import Path

from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from elasticity.airflow.hooks import connected, job_configs
from elasticity.airflow.shared_state import check_shared_state
from elasticity.checkpoint.store.pool import StorePool
from elasticity.config import JobConfig, load_config
from elasticity.kafka.consumer import HeldKafkaInputs
from elasticity.metrics.exposition import JobSample, JobsCollector
from elasticity.views.job_sample import sample_job

log = logging.getLogger(__name__)


class JobsScrape:
    """The per-process state of the endpoint: the stores (shared with the page) and each job's held Kafka
    clients, replaced when the job's config changes."""

    def __init__(self, stores: StorePool) -> None:
        self.stores = stores
        self._inputs: dict[str, tuple[object, HeldKafkaInputs]] = {}
        self._lock = threading.Lock()

    def _held_inputs(self, job: str, config: JobConfig) -> HeldKafkaInputs:
        key = (tuple(sorted(config.raw_map.items())), config.deployment)
        found = self._inputs.get(job)
        if found is not None and found[0] == key:
            return found[1]
        if found is not None:
            found[1].close()
        inputs = HeldKafkaInputs(config)
        self._inputs[job] = (key, inputs)
        return inputs

    def sample(self, job: str, path: Path) -> JobSample:
        """One job's figures (its config file at `path`); a config or store that cannot be read gives `up 0`
        (logged), never a failed scrape."""
        try:
            config = connected(load_config(path))
            check_shared_state(config)
            store = self.stores.get(config.checkpoint_store_url(), config.checkpoint_history_size)
            return sample_job(config, store, self._held_inputs(job, config))
        except Exception as e:  # noqa: BLE001 - one job's trouble must not hide the others' metrics
            log.warning("metrics of job %r not read: %s", job, e)
            return JobSample(job=job, read_ok=False, error=str(e))

    def render(self, jobs: Iterable[str], accept: str | None) -> tuple[bytes, str]:
        """The exposition of `jobs` in the format `accept` asks for, and its content type."""
        with self._lock:
            registry = CollectorRegistry(auto_describe=False)
            configs = job_configs()
            registry.register(JobsCollector(lambda: [self.sample(job, configs[job]) for job in sorted(jobs) if job in configs]))
            encoder, content_type = choose_encoder(accept or "")
            return encoder(registry), content_type

    def close(self) -> None:
        with self._lock:
            for _, inputs in self._inputs.values():
                inputs.close()
            self._inputs.clear()
