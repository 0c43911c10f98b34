"""Where a batch's results land, which both sides share: the workers write the sinks' files and stage Kafka
outputs, the driver commits them exactly once, checks whose they are and compacts them. So it imports neither
side, and both may use it."""
