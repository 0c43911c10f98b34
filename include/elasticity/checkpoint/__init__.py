"""Checkpoints per virtual task: formats (V1, V2), rescale migration, the SQL store."""
