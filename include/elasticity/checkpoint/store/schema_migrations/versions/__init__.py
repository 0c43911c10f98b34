"""The revisions of the checkpoint store's schema, oldest first: 0001 (the baseline)."""
