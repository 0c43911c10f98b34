"""The driver's side of a batch, as Samza's JobCoordinator: what is decided once per job and batch, in one
process, before the workers run and after they report (the generation and its rescale, the lease, the plan, the
lag, the commit, the batch's outcome). It sits on top: it may use the container and the sinks, and neither
imports it, so a Python worker never loads the driver's side."""
