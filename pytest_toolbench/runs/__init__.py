"""Runs you can find again: each run's folder holds its index entry and report (record.py);
``toolbench runs`` lists them (store.py) and ``toolbench prune`` removes old ones (prune.py)."""
