"""harness.measure.cache: the measurement cache is data, rebuilt when it is not a plain JSON file."""

from __future__ import annotations

import os

from fixtures.files import in_time as _in_time


def test_a_measurement_cache_that_is_a_fifo_or_a_link_is_rebuilt_at_once(tmp_path, monkeypatch):
    from harness.measure.cache import MeasurementCache

    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path))
    os.mkfifo(tmp_path / "measurements.json")
    assert _in_time(lambda: MeasurementCache().values) == {}
    (tmp_path / "measurements.json").unlink()
    (tmp_path / "elsewhere.json").write_text('{"k": {"value": 1.0}}')
    (tmp_path / "measurements.json").symlink_to(tmp_path / "elsewhere.json")
    assert MeasurementCache().values == {}
    (tmp_path / "measurements.json").unlink()
    (tmp_path / "measurements.json").write_text(
        '{"a": {"value": NaN}, "b": {"value": "1"}, "c": [1], "d": {"value": 2.5}, "e": {"error": "x"}}'
    )
    assert MeasurementCache().values == {"d": {"value": 2.5}, "e": {"error": "x"}}
