"""The architecture audit with its dense rows: :mod:`downstream.audit` counts a row's whole detector/segmentor for
:mod:`results.audit` -- peers that do not import each other, joined here for ``depthbench verify``, ``depthbench
results`` and the demo."""

from __future__ import annotations

from results.audit import DenseCounter


def dense_counter() -> DenseCounter:
    """The dense rows' detector/segmentor counts of :mod:`downstream.audit`, for :mod:`results.audit`; downstream,
    which imports mmdet/mmseg, loads on first use."""

    def measure_row(paper: str, table: str, row: str, column: str) -> float:
        from downstream.audit import measure_row  # lazy: mmdet/mmseg, only for a dense row's count

        return measure_row(paper, table, row, column)

    def cache_key(paper: str, table: str, row: str) -> list:
        from downstream.audit import cache_key  # lazy: mmdet/mmseg, only for a dense row's count

        return cache_key(paper, table, row)

    return DenseCounter(measure_row, cache_key)
