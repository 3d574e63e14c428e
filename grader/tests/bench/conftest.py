"""Benches run in these tests write their records into a temporary folder, never the kit's."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _records_elsewhere(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_BENCH_RECORDS", str(tmp_path / "records"))
