"""`fill_bitmasks`: the masks of a whole batch, in parallel over the core instances.

A serving engine fills one mask row per request at every step. The matchers of a batch live in
the instances of their pool (`_core/pool.py`); each instance computes its matchers' masks in
one call (`ts_matcher_fill_bitmasks`), and the instances work at the same time on a thread pool
(wasmtime releases the GIL during a call). So a batch costs about `max over instances` of
their work instead of the sum, plus one Python round trip per instance instead of per matcher.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .._core import Core
from .._errors import ArgumentError, TokensieveError
from .matcher import Matcher, _row_view

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()
_WORKERS_MAX = 8
# Below this many matchers, handing groups to threads costs more than it saves.
_PARALLEL_MIN = 16


def _pool_executor() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        with _executor_lock:
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=_WORKERS_MAX, thread_name_prefix="tokensieve-fill")
    return _executor


def fill_bitmasks(matchers: Sequence[Matcher], bitmask: Any, rows: Sequence[int] | None = None) -> None:
    """Fill one mask row per matcher of a batch, in parallel over their core instances.

    Args:
        matchers: the batch's matchers (all of one vocabulary width).
        bitmask: an int32 numpy array or CPU torch tensor of shape (batch, words), words =
            ceil(vocab_size / 32) (the layout of `Matcher.fill_bitmask`).
        rows: the row of each matcher (default: matcher i fills row i).

    Raises:
        ValueError: mismatched widths, rows or array.
        LimitError, CoreTrap: as `Matcher.fill_bitmask` for the first matcher that failed (the
            others' rows are filled).
    """
    if not matchers:
        return
    rows = list(range(len(matchers))) if rows is None else list(rows)
    if len(rows) != len(matchers):
        raise ArgumentError(f"fill_bitmasks got {len(matchers)} matchers and {len(rows)} rows")
    words = matchers[0].mask_words
    if any(m.mask_words != words for m in matchers):
        raise ArgumentError("fill_bitmasks needs matchers of one vocabulary width")
    rows_total = _rows_of(bitmask, words)
    for row in rows:
        if not 0 <= row < rows_total:
            raise ArgumentError(f"row {row} is outside the bitmask's {rows_total} rows")
    groups: dict[Core, list[tuple[Matcher, int]]] = {}
    for matcher, row in zip(matchers, rows):
        core = matcher._live_core()
        groups.setdefault(core, []).append((matcher, row))
    jobs = list(groups.items())
    if len(jobs) == 1 or len(matchers) < _PARALLEL_MIN:
        failures = [_fill_group(core, entries, bitmask, words) for core, entries in jobs]
    else:
        failures = list(_pool_executor().map(lambda job: _fill_group(job[0], job[1], bitmask, words), jobs))
    for failed in failures:
        for matcher, row in failed:
            matcher.fill_bitmask(bitmask, row)  # raises the matcher's own error


def _rows_of(bitmask: Any, words: int) -> int:
    """Check the batch array once (dtype, shape, contiguity); its row count."""
    _row_view(bitmask, 0, words)
    shape = getattr(bitmask, "shape", None)
    if shape is None:
        return memoryview(bitmask).nbytes // (4 * words)
    if len(shape) != 2:
        raise ArgumentError(f"fill_bitmasks needs a 2-D (batch, words) array, got shape {tuple(shape)}")
    return int(shape[0])


def _row_address(bitmask: Any, words: int) -> int | None:
    """The host address of row 0 of a C-contiguous numpy array or CPU tensor, else None."""
    if type(bitmask).__module__.startswith("torch"):
        return int(bitmask.data_ptr()) if bitmask.is_contiguous() else None
    interface = getattr(bitmask, "__array_interface__", None)
    if interface is None or not bitmask.flags["C_CONTIGUOUS"]:
        return None
    return int(interface["data"][0])


def _fill_group(core: Core, entries: list[tuple[Matcher, int]], bitmask: Any, words: int) -> list[tuple[Matcher, int]]:
    """Fill one instance's matchers in one call; returns the entries that failed or moved."""
    # Matcher locks in a global order (by id), so two batch fills never wait on each other.
    entries = sorted(entries, key=lambda entry: id(entry[0]))
    locked: list[Matcher] = []
    try:
        handles: list[int] = []
        dests: list[Any] = []
        dest_at = getattr(core.runtime, "dest_at", None)
        base = _row_address(bitmask, words) if dest_at is not None else None
        row_bytes = 4 * words
        moved: list[tuple[Matcher, int]] = []
        batch: list[tuple[Matcher, int]] = []
        for matcher, row in entries:
            matcher._lock.acquire()
            locked.append(matcher)
            if matcher._core is not core or matcher._failure is not None:
                moved.append((matcher, row))
                continue
            handles.append(matcher._handle)
            if base is not None:
                dests.append(dest_at(base + row * row_bytes, row_bytes))
            else:
                dests.append(core.runtime.dest_for(_row_view(bitmask, row, words)))
            batch.append((matcher, row))
        if not batch:
            return moved
        try:
            bad = core.matcher_fill_bitmasks(handles, words, dests)
        except TokensieveError:
            return moved + batch  # the instance failed: each matcher finds out on its own
        return moved + [batch[i] for i in bad]
    finally:
        for matcher in locked:
            matcher._lock.release()
