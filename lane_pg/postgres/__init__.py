"""PostgreSQL side of lane_pg: the backend, drivers, schema and migration helpers."""
