"""One micro-batch from plan to commit, without Spark (the engine in `spark/` drives these): SEP-32's
job coordinator (generations, checkpoints, rescales), the batch's pure rules (planning), reading and
processing a process slot's virtual-task slices, the sinks and their exactly-once commit, the
checkpoint upload after CheckpointV2's async commit, the job's lease, its lag, and sink compaction."""
