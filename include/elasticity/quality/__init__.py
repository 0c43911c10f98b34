"""Data quality: proof from the audit, the sinks and a re-read of the input that
no record was lost, processed twice, misrouted or reordered."""
