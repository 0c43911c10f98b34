"""The worker's side of a batch, as Samza's SamzaContainer: what runs in a Python worker for its process slots
and what that worker keeps from batch to batch (reading and routing, units on its threads, slot claims and
files, the user's shipped code), with the ProcessContext the driver ships to it. Apart from the coordinator so
that a worker imports only what it runs: it may use the sinks, never the coordinator."""
