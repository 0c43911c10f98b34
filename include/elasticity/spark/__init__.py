"""The micro-batch engine on Spark: one Spark stage per batch, a task per process
slot pinned to its executor (placement), each reading its own SSPs' offset
ranges, routing records to virtual tasks and processing their slices in a Python
worker (no shuffle); then sinks and the commit on the driver.
The only part of the library that imports pyspark."""
