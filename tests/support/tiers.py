"""The fixtures that stand for what makes a test slow, and the marker each gives the tests that use it.

tests/conftest.py applies them (pytest_collection_modifyitems reads `item.fixturenames`, so a test marked
through a fixture of a fixture is marked too); pyproject.toml declares the markers; `make test-fast` runs the
tests with none of them; tests/test_tiers.py keeps the three in step.
"""

from __future__ import annotations

MARKED_BY = {
    "real_model": "model",   # the real embedding models (an Index or Daemon opened without an embedder loads one)
    "spawn": "process",      # a child process: groove, python, `groove serve`, the wheel build, a stdio server
    "browser": "browser",    # a real headless Chromium
    "npm_tools": "npm",      # the npm-installed MCP clients and Node
    "postgres": "postgres",  # a real PostgreSQL server with pgvector (tests/support/postgres.py): a new database
    "postgres_server": "postgres",  # the same server itself (its roles, databases of another owner)
}
MAY_SPAWN = {"process", "browser", "npm", "postgres"}  # the markers of tests allowed to start a process
# A store contract test runs once per store (the `backend` fixture's params); its postgresql side is marked
# `postgres` as if it took the fixture.
PARAM_MARKS = {("backend", "postgresql"): "postgres"}
