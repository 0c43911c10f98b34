"""One micro-batch from plan to commit, without Spark (the engine in `spark/` drives these), cut by role as Samza
cuts a job: `coordinator/`, the driver's side (SEP-32's job coordinator: generations, checkpoints, rescales; the
job's lease, the batch's pure rules (planning), its lag, the checkpoint upload after CheckpointV2's async commit,
the batch's outcome); `container/`, the Python worker's side (reading and processing a process slot's
virtual-task slices, what the worker keeps across batches, the ProcessContext the driver ships to it); `sinks/`,
the sinks, their identity, their exactly-once commit and compaction. Imports go one way: the coordinator may use
the container and the sinks, the container the sinks, the sinks neither."""
