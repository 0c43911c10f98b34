"""Alembic's scripts of the checkpoint store's schema (`script_location`): env.py and versions/."""
