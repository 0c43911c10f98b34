"""The micro-batch engine on Spark: read offset ranges, route records to virtual
tasks in the JVM, process virtual-task slices in Python workers, sink, commit.
The only part of the library that imports pyspark."""
