"""The checkpoint store: SQL through SQLAlchemy (SQLite embedded, PostgreSQL in production).

It keeps, per job: the JobModel generations (factor and model of each), each virtual task's checkpoint
history (the last N per version), the write-ahead batch plans, a lease with expiry, each batch's and
rescale's metrics, each run's Kafka transactional ids, the data-quality edge and run index, and each task
attempt's failure; and each Spark Connect server's health. Whatever a process writes that another reads back
lives here (or in the job's object store), never on one worker's disk. The `expire_*` methods are the retention rules
(run by `elasticity.maintenance`): each deletes in statements of at most DELETE_CHUNK rows.

Every write of checkpoints, plans or generations goes through one fenced transaction (`_fenced`): it opens
with an UPDATE of the job row guarded by the generation the writer planned under. That statement both fences
(a stale writer matches no row, fails, and changes nothing) and takes the row lock, so everything read after
it in the same transaction is current. All tasks of a batch, or of a rescale, are written in that one
transaction.

`CheckpointStore` (`checkpoint_store`) is the facade of the package's modules: `store_schema` (the tables), `schema_upgrade` and
`schema_migrations/` (Alembic), `store_engine`, `leases` (leases and fences), `batch_rows`,
`generation_rows`, `checkpoint_rows`, `metric_rows`, `transactional_ids`, `quality_rows`, `health_rows` and
`retention`.
"""

from elasticity.checkpoint.store.checkpoint_store import DELETE_CHUNK, RACE_ATTEMPTS, CheckpointStore
from elasticity.checkpoint.store.generation_rows import Generation
from elasticity.checkpoint.store.health_rows import AttemptFailure, EngineState
from elasticity.checkpoint.store.leases import Lease
from elasticity.checkpoint.store.quality_rows import QualityEdge, QualityRun
from elasticity.checkpoint.store.schema_upgrade import SCHEMA_ATTEMPTS
from elasticity.checkpoint.store.store_engine import CONNECT_TIMEOUT_S, make_engine, masked
from elasticity.checkpoint.store.store_errors import (
    BatchStateError,
    CorruptRowError,
    LeaseHeldError,
    PendingBatchError,
    StaleGenerationError,
    StoreError,
    StoreUnavailable,
    SupersededError,
)
from elasticity.checkpoint.store.store_schema import (
    CHECKPOINT_COLUMNS,
    batch_metrics,
    batches,
    checkpoints,
    generations,
    jobs,
    metadata,
    rescale_metrics,
    transactions,
)

__all__ = [
    "CHECKPOINT_COLUMNS",
    "CONNECT_TIMEOUT_S",
    "DELETE_CHUNK",
    "RACE_ATTEMPTS",
    "SCHEMA_ATTEMPTS",
    "AttemptFailure",
    "BatchStateError",
    "CorruptRowError",
    "CheckpointStore",
    "EngineState",
    "Generation",
    "Lease",
    "LeaseHeldError",
    "PendingBatchError",
    "QualityEdge",
    "QualityRun",
    "StaleGenerationError",
    "StoreError",
    "StoreUnavailable",
    "SupersededError",
    "batch_metrics",
    "batches",
    "checkpoints",
    "generations",
    "jobs",
    "make_engine",
    "masked",
    "metadata",
    "rescale_metrics",
    "transactions",
]
