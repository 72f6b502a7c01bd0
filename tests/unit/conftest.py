"""The unit suite is pure: no root, no embedded cluster, no database. A unit test that
asks for the cluster fails here, naming where it belongs (tests/system)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def layout():
    pytest.fail("a unit test asked for the embedded cluster: move it to tests/system")
