"""What the driver ships to the process stage with each batch: the ProcessContext (plain values only)."""

from __future__ import annotations

from dataclasses import dataclass

from elasticity.batch.shipped import Shipped
from elasticity.jobmodel.model import SystemStream
from elasticity.kafka.admin import Kafka
from elasticity.state.table import SideInputBatch
from elasticity.state.worker import BatchState


@dataclass(frozen=True, kw_only=True)
class ProcessContext:
    """Everything a worker needs, shipped with the closure (plain values only)."""

    job_name: str
    batch_id: int
    app_class: str
    job_inputs: tuple[SystemStream, ...]
    key_serdes: dict[str, str]  # system -> serde
    msg_serdes: dict[str, str]
    output_path: str
    audit_path: str
    dead_letter_path: str
    output_bootstraps: dict[str, Kafka]  # system -> its producer's settings, for Kafka outputs
    policy: str = "dlq"
    max_concurrency: int = 1
    callback_timeout_ms: int | None = None
    thread_pool_size: int = 0  # job.container.thread.pool.size (the config's default is 64): 0 = one after another
    state: BatchState | None = None  # a job with stores
    tables: SideInputBatch | None = None  # a job with tables: their side inputs and this batch's read-up-to offsets
    stage_kafka: bool = False  # processing.guarantee=exactly_once: Kafka outputs wait for the commit's transaction
    slot_claims: str | None = None  # a local master's batch token: tasks claim the slot their process holds (slot_claims)
    slots: int = 0  # the job's process slots (with slot_claims)
    shipped: Shipped = ()  # the user code the driver shipped (spark.shipping): imported from there
