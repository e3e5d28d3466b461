"""Real-process tests of the worker: ``python -m lane_pg worker`` against a real PostgreSQL."""
