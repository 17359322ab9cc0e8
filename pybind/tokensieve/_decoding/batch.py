"""`fill_bitmasks`: the masks of a whole batch, in parallel over the core instances.

A serving engine fills one mask row per request at every step. The matchers of a batch live in
the instances of their pool (`_core/pool.py`); each instance computes its matchers' masks in
one call (`ts_matcher_fill_bitmasks`), and the instances work at the same time, one thread each
(a call into wasmtime releases the GIL). So a batch costs about the largest instance's work
instead of the sum, plus one Python round trip per instance instead of per matcher.

Why it is shaped this way (measured on 2 cores, MaskBench requests on Llama-3, where a step's
mask costs ~3-30 µs per matcher, with spikes of 1-2 ms):

- **The GIL changes hands about once per group.** The caller only checks the batch and splits
  it by instance (~0.35 µs a matcher); the thread that takes a group locks and prepares it,
  makes one call into the module, and copies its rows out with the GIL held (a PYFUNCTYPE
  memmove). Each time a thread gives up the GIL while the other wants it, getting it back
  costs a thread switch; with a ctypes memmove per row (which releases the GIL) and
  per-matcher Python in both threads, the threads convoyed.
- **The caller works too, and takes the largest group.** Helpers (woken through a
  `SimpleQueue`, ~5 µs) and the caller pull groups from one list; the caller never waits for
  a helper that has not started, so on a busy machine a late helper finds nothing left.
- **Threads only where they pay.** A batch whose estimated work (each instance's CPU time per
  matcher in its last batch) is under ~400 µs, or fewer than 8 matchers, is filled by the
  caller alone: handing a group over and waiting for it costs more than it saves. Threads
  also stop for a while when they did not run at the same time (the other cores busy with
  other work), measured as CPU time over wall time.
- **No matcher lock is waited for while others are held.** The locks are tried; a matcher
  that is busy elsewhere, failed, or moved to another instance is filled afterwards on its own
  (`Matcher.fill_bitmask`), which also raises its error. So two batch fills sharing matchers
  cannot deadlock.

What limits the gain: the work is split by instance, and a matcher cannot move, so a batch
takes as long as its busiest instance (with 2 instances and 64 requests, the busier one has
~55-60% of the work at a typical step); and two instances filling at once each run ~10-15%
slower than alone (the masks are 16 kB each, written and copied through the memory system).
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from .._core import Core
from .._errors import ArgumentError, TokensieveError
from .matcher import Matcher, batch_slot, row_view

_THREADS_MAX = 8
# Below this many matchers each fills on its own: a batch's fixed cost (~13 µs: the checks,
# one call per instance) is more than the ~1.2 µs a matcher it saves.
_BATCH_MIN = 8
# Below this much estimated core work (µs) a batch is filled by the calling thread alone.
_PARALLEL_WORK_MIN_US = 400.0
# The cost per matcher assumed for an instance that has not filled a batch yet (µs).
_COST_US_UNKNOWN = 15.0
# Each instance's cost per matcher in its last batch fill (µs), what the next one expects.
_cost_us: weakref.WeakKeyDictionary[Core, float] = weakref.WeakKeyDictionary()

# Filling on threads must gain at least this much (CPU time over wall time: about what the
# caller alone would have taken, over what the threads took), else the next
# _BACKOFF_CALLS batches are filled by the caller alone.
_GAIN_MIN = 1.1
_BACKOFF_CALLS = 64
_calls = 0

# A thread's CPU clock (Pyodide has none; it has one instance, so it never uses threads here).
_thread_time: Callable[[], float] = getattr(time, "thread_time", time.perf_counter)

# A group: an instance and its (matcher, row) pairs.
_Group = tuple[Core, list[tuple[Matcher, int]]]


def fill_bitmasks(matchers: Sequence[Matcher], bitmask: Any, rows: Sequence[int] | None = None) -> None:
    """Fill one mask row per matcher of a batch, in parallel over their core instances.

    Args:
        matchers: the batch's matchers (all of one vocabulary width).
        bitmask: an int32 numpy array or CPU torch tensor of shape (batch, words), words =
            ceil(vocab_size / 32) (the layout of `Matcher.fill_bitmask`).
        rows: the row of each matcher (default: matcher i fills row i).

    Raises:
        ValueError: mismatched widths, rows or array.
        LimitError, CoreTrap: as `Matcher.fill_bitmask`, for the first matcher that failed (the
            others' rows are filled).

    Cost: about the largest instance's share of the core work, plus ~1 µs per matcher in the
    calling thread.
    """
    count = len(matchers)
    if not count:
        return
    if rows is None:
        rows = range(count)
    elif len(rows) != count:
        raise ArgumentError(f"fill_bitmasks got {count} matchers and {len(rows)} rows")
    if count == 1:
        matchers[0].fill_bitmask(bitmask, _row_index(rows[0]))  # checks the array and the row
        return
    if count < _BATCH_MIN:
        words = matchers[0].mask_words
        rows_total, _ = _layout(bitmask, words)
        pairs = [(matcher, _row_index(row)) for matcher, row in zip(matchers, rows)]
        for matcher, row in pairs:
            if not 0 <= row < rows_total:
                raise ArgumentError(f"row {row} is outside the bitmask's {rows_total} rows")
            if matcher.mask_words != words:
                raise ArgumentError("fill_bitmasks needs matchers of one vocabulary width")
        _fill_alone(pairs, bitmask)
        return
    groups, targets = _group(matchers, rows, bitmask)
    _fill_alone(_fill_groups(groups, targets), bitmask)


def _row_index(row: Any) -> int:
    try:
        return int(row.__index__())
    except AttributeError:
        raise ArgumentError(f"rows must be ints, not {type(row).__name__}") from None


def _layout(bitmask: Any, words: int) -> tuple[int, memoryview | None]:
    """Check the batch array once (dtype, shape, contiguity); its row count and a flat byte
    view of all of it, which the row targets are sliced from (None when it has none: a
    non-contiguous array, or a buffer that is not numpy or torch)."""
    if type(bitmask).__module__ == "numpy":
        # The common case, checked directly: row_view's general checks cost ~10 µs.
        flags = bitmask.flags
        shape = bitmask.shape
        if (
            len(shape) == 2 and shape[1] == words and shape[0] > 0 and bitmask.dtype.char in "il"
            and bitmask.dtype.itemsize == 4 and flags.c_contiguous and flags.writeable
        ):
            return int(shape[0]), memoryview(bitmask).cast("B")
    row_view(bitmask, 0, words)
    shape = getattr(bitmask, "shape", None)
    if shape is None:
        return memoryview(bitmask).nbytes // (4 * words), None
    if len(shape) != 2:
        raise ArgumentError(f"fill_bitmasks needs a 2-D (batch, words) array, got shape {tuple(shape)}")
    return int(shape[0]), _flat_view(bitmask)


def _flat_view(bitmask: Any) -> memoryview | None:
    """A flat writable byte view of a C-contiguous numpy array or CPU tensor, else None."""
    if type(bitmask).__module__.startswith("torch"):
        bitmask = bitmask.numpy()  # row_view checked it is on the CPU
    flags = getattr(bitmask, "flags", None)
    if flags is None or not flags["C_CONTIGUOUS"]:
        return None
    return memoryview(bitmask).cast("B")


class _Targets:
    """Where the rows of one batch go: the array, its row size, and a flat byte view of it
    (None when it has none; each row is then viewed on its own)."""

    __slots__ = ("bitmask", "words", "row_bytes", "flat")

    def __init__(self, bitmask: Any, words: int, flat: memoryview | None) -> None:
        self.bitmask = bitmask
        self.words = words
        self.row_bytes = 4 * words
        self.flat = flat


def _group(matchers: Sequence[Matcher], rows: Sequence[Any], bitmask: Any) -> tuple[list[_Group], _Targets]:
    """Check the batch and split it by instance: the calling thread's whole serial part
    (~0.3 µs a matcher); locking and preparing a group is left to the thread that fills it.

    Raises:
        ArgumentError: mismatched widths, a row outside the array, a bad array (nothing has
            been filled yet).
    """
    words = matchers[0].mask_words
    rows_total, flat = _layout(bitmask, words)
    groups: dict[Core, _Group] = {}
    get_group = groups.get
    for matcher, row in zip(matchers, rows):
        if type(row) is not int:
            row = _row_index(row)
        if not 0 <= row < rows_total:
            raise ArgumentError(f"row {row} is outside the bitmask's {rows_total} rows")
        if matcher.mask_words != words:
            raise ArgumentError("fill_bitmasks needs matchers of one vocabulary width")
        core = batch_slot(matcher)[0]
        group = get_group(core)
        if group is None:
            group = groups[core] = (core, [])
        group[1].append((matcher, row))
    return list(groups.values()), _Targets(bitmask, words, flat)


def _fill_group(group: _Group, targets: _Targets, cpu_s: list[float] | None = None) -> list[tuple[Matcher, int]]:
    """Lock, prepare and fill one instance's matchers in one call; the (matcher, row) pairs
    to fill on their own afterwards (busy in another thread, failed, moved to another
    instance, or failed in this call). Appends the CPU seconds it took to `cpu_s`.

    Locks are only tried, never waited for, so two batch fills sharing matchers cannot
    deadlock; a thread releases the locks it took.
    """
    core, pairs = group
    if core.poisoned:
        return pairs
    started = _thread_time()
    later: list[tuple[Matcher, int]] = []
    batch: list[tuple[Matcher, int]] = []
    handles: list[int] = []
    dests: list[memoryview] = []
    locked: list[Any] = []
    flat, row_bytes = targets.flat, targets.row_bytes
    try:
        for matcher, row in pairs:
            lock = batch_slot(matcher)[1]
            if not lock.acquire(False):
                later.append((matcher, row))
                continue
            locked.append(lock)
            now, _, failure, handle = batch_slot(matcher)
            if now is not core or failure is not None:
                later.append((matcher, row))
                continue
            handles.append(handle)
            if flat is not None:
                start = row * row_bytes
                dests.append(flat[start : start + row_bytes])
            else:
                dests.append(row_view(targets.bitmask, row, targets.words))
            batch.append((matcher, row))
        if not batch:
            return later
        try:
            bad = core.matcher_fill_bitmasks(handles, targets.words, dests)
        except TokensieveError:
            return later + batch  # the instance failed: each matcher finds out on its own
        return later + [batch[i] for i in bad] if bad else later
    finally:
        for lock in locked:
            lock.release()
        spent = _thread_time() - started
        _cost_us[core] = spent * 1e6 / len(pairs)
        if cpu_s is not None:
            cpu_s.append(spent)


def _fill_groups(groups: list[_Group], targets: _Targets) -> list[tuple[Matcher, int]]:
    """Fill every group, several at once when that pays; the pairs to fill on their own.

    Threads pay when the batch's work is well above the cost of handing a group to another
    thread (waking it and waiting for it), and when the threads really run at the same time:

    - The work is estimated from each instance's CPU time per matcher in its last batch fill;
      below `_PARALLEL_WORK_MIN_US` the caller fills every group itself.
    - After each fill on threads, the gain it got (CPU time of the groups over the wall time)
      updates a moving average. On a machine whose other cores are busy, a woken helper
      shares the caller's core and the gain is about 1: below `_GAIN_MIN` the next
      `_BACKOFF_CALLS` batches run on the caller alone, then threads are tried again.

    The caller takes the group expected to be the largest (it starts first, and then rarely
    waits for a helper at the end); helpers take the rest, and the caller takes whatever is
    left when it is done.
    """
    global _calls
    _calls += 1
    threads = min(len(groups), _cpu_count(), _THREADS_MAX)
    if threads > 1:
        estimates = [len(pairs) * _cost_us.get(core, _COST_US_UNKNOWN) for core, pairs in groups]
        if sum(estimates) < _PARALLEL_WORK_MIN_US or _calls < _gain.serial_until:
            threads = 1
    if threads < 2:
        return [pair for group in groups for pair in _fill_group(group, targets)]
    pending = [group for _, group in sorted(zip(estimates, groups), key=lambda pair: pair[0])]
    later: list[tuple[Matcher, int]] = []
    errors: list[BaseException] = []
    cpu_s: list[float] = []
    finished = itertools.count(1)  # next() is atomic: exactly one thread sees the last group
    all_done = threading.Lock()
    all_done.acquire()
    total = len(pending)

    def fill(group: _Group) -> None:
        try:
            later.extend(_fill_group(group, targets, cpu_s))
        except BaseException as error:  # noqa: BLE001 - re-raised by the caller
            errors.append(error)
        finally:
            if next(finished) == total:
                all_done.release()

    def drain() -> None:
        while True:
            try:
                group = pending.pop()
            except IndexError:
                return
            fill(group)

    started = time.perf_counter()
    largest = pending.pop()  # the caller's, taken before any helper is awake
    _workers.run(drain, threads - 1)
    fill(largest)
    drain()
    all_done.acquire()
    _gain.record(sum(cpu_s) / max(time.perf_counter() - started, 1e-9), _calls)
    if errors:
        raise errors[0]
    return later


class _Gain:
    """The moving average of what filling on threads gained (see `_fill_groups`)."""

    def __init__(self) -> None:
        self.average = 2.0
        self.serial_until = 0

    def record(self, gain: float, calls: int) -> None:
        self.average = 0.7 * self.average + 0.3 * gain
        if self.average < _GAIN_MIN:
            self.serial_until = calls + _BACKOFF_CALLS
            self.average = _GAIN_MIN + 0.3  # the next try starts with a fair chance


def _fill_alone(pairs: list[tuple[Matcher, int]], bitmask: Any) -> None:
    """Fill each pair with its matcher's own `fill_bitmask`; raise the first error at the end."""
    first_error: TokensieveError | None = None
    for matcher, row in pairs:
        try:
            matcher.fill_bitmask(bitmask, row)
        except TokensieveError as error:
            first_error = first_error or error
    if first_error is not None:
        raise first_error


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class _Workers:
    """Daemon threads that run the jobs handed to them (a `queue.SimpleQueue`, the cheapest
    handoff: a helper waits in C without the GIL and wakes in a few µs).

    Started on first use, never stopped; a forked child starts its own.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

    def run(self, job: Callable[[], None], copies: int) -> None:
        """Have `copies` threads run `job` (without waiting for them)."""
        if len(self._threads) < copies:
            self._start(copies)
        for _ in range(copies):
            self._jobs.put(job)

    def _start(self, count: int) -> None:
        with self._lock:
            while len(self._threads) < count:
                thread = threading.Thread(
                    target=self._work, args=(self._jobs,), name=f"tokensieve-fill-{len(self._threads)}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

    @staticmethod
    def _work(jobs: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            jobs.get()()

    def forget(self) -> None:
        """After a fork: the threads are gone in the child."""
        self._lock = threading.Lock()
        self._threads = []
        self._jobs = queue.SimpleQueue()


_workers = _Workers()
_gain = _Gain()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_workers.forget)
