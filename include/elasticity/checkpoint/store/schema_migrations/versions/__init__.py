"""The revisions of the checkpoint store's schema, oldest first: 0001 (the baseline), 0002 (attempts fenced apart; data quality and health in the store)."""
