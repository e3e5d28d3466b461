"""Runnable lane_pg examples (a package so ``--app examples.quickstart:app`` imports them)."""
