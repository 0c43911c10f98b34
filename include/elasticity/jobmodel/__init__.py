"""Samza's JobModel, with SEP-32's elasticity: immutable value types for systems, streams, partitions,
tasks and containers; the groupers (SAMZA-71 schemes) that expand partitions into virtual tasks over
key buckets and place them on containers; key bucketing as Samza computes it; task names; and the
SamzaObjectMapper JSON serde, so a model reads and writes as Samza's does."""
