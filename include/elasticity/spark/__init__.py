"""The micro-batch engine on Spark: read offset ranges and route records to virtual
tasks in one Python stage, shuffle by process slot, process virtual-task slices
in Python workers, sink, commit.
The only part of the library that imports pyspark."""
