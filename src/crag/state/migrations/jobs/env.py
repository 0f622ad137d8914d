"""Alembic environment of the jobs group; the migrations run through :func:`crag.state.migrate.upgrade`."""

from crag.state.migrate import run_env

run_env()
