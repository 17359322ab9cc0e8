"""`fill_bitmasks`: the masks of a whole batch, in parallel over the core instances.

A serving engine fills one mask row per request at every step. The matchers of a batch live in
the instances of their pool (`_core/pool.py`); each instance computes its matchers' masks in
one call (`ts_matcher_fill_bitmasks`), and the instances work at the same time, one thread each
(a call into wasmtime releases the GIL). So a batch costs about the largest instance's work
instead of the sum, plus one Python round trip per instance instead of per matcher.

Why it is shaped this way (measured on 2 cores, MaskBench requests on Llama-3, where a step's
mask costs ~2-30 µs per matcher, with spikes of 1-2 ms; docs/integrations.md has the figures):

- **Python runs on one thread, the calls on several.** Only one thread runs Python at a time
  (the GIL), so the Python work of a batch is serial whatever thread does it. The caller
  checks the batch, groups it by instance and tries each matcher's lock in one pass
  (`_lock_groups`, ~0.6 µs a matcher; ~0.3 when the batch is the one it filled last, whose
  grouping it keeps: `_Plan`), prepares each instance's call (`Core.batch_begin`) and
  hands it to that instance's helper thread, which makes the call (releasing the GIL) and
  copies its rows (one memoryview assignment a row, from the matcher's own buffer in the
  core) while the caller makes its own.
- **No thread sleeps inside a batch if it can help it.** On this VM a thread that blocks
  (on a lock, or for the GIL) runs again 15-40 µs after it is released, about a tenth of a
  64-request batch. So the caller waits for its helpers inside its own instance
  (`Core.spin_until`, the GIL released) until each has bumped a word there, instead of on
  their locks (`_Run`).
- **An instance has a home thread.** The same thread fills an instance at every step, so the
  instance's memory (the matchers' mask buffers, its grammars' caches) stays in one core's
  cache: here a group filled on the other core than at the last step ran up to 2x slower,
  and data last written by the other core copies at half speed.
- **The caller never waits for a helper that has not started.** A call is made by whichever
  thread claims it first; the caller makes its own calls, then any call no helper has claimed
  yet, so on a busy machine a late helper (waking one costs 20-70 µs on this VM) finds
  nothing left.
- **Threads only where they pay.** A batch whose expected work (each instance's time per
  matcher in its last call) is under ~200 µs is filled by the caller alone, and fewer than 16
  matchers are filled one by one (each `fill_bitmask` call is the cheaper path for so few).
  Threads also stop for a while when they did not run at the same time (the other cores busy
  with other work), measured as the calls' CPU time over their wall time.
- **No matcher lock is waited for.** The locks are tried; a matcher that is busy elsewhere or
  failed, or whose instance was retired, is filled afterwards on its own
  (`Matcher.fill_bitmask`), which also raises its error. So two batch fills sharing matchers
  cannot deadlock. Instance locks are taken in the order of the instances' serials.

What limits the gain: a matcher cannot move, so a batch takes as long as its busiest
instance, and per-step costs are spiky (one request's mask may cost 1 ms) and not persistent
from step to step, so the busier of two instances holds ~55% of a step's work at the median
(placing requests by their measured cost made it worse: 63%); and the serial Python part
(~1.5-2 µs a matcher: checks, locks, the copies, of which the copies are ~0.9: 16 KB a
Llama-3 row) is a fifth to a quarter of a 64-request batch. On this machine two processes
splitting the same batch with no Python at all (`bench batch --ceiling`) gain 1.75-1.89x.
"""

from __future__ import annotations

import operator
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .._core import Core
from .._core.binding import BatchCall
from .._errors import ArgumentError, CoreTrap, LimitError, TokensieveError
from .matcher import (
    Matcher, batch_mark, batch_pending, batch_settle, batch_take, batch_unknown, batch_unsettled, row_view, try_lock,
    whole_view,
)

_THREADS_MAX = 8
# Below this many matchers each fills on its own (unless their expected work is enough for
# threads): a batch's fixed cost (~15 µs: the checks, one call per instance) is more than the
# ~0.7 µs a matcher it saves.
_BATCH_MIN = 16
# Below this much estimated core work (µs) a batch is filled by the calling thread alone.
_PARALLEL_WORK_MIN_US = 200.0
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


class _Group:
    """One instance's part of a batch fill: its locked (matcher, row) pairs, their handles,
    row views and pending tokens (-1: none; see `Matcher.consume_token`), their places in the
    batch, and the matchers' mask buffers when an earlier call found them (else None)."""

    __slots__ = ("core", "pairs", "handles", "dests", "tokens", "indices", "sources")

    def __init__(self, core: Core, sources: list[Any] | None = None) -> None:
        self.core = core
        self.pairs: list[tuple[Matcher, int]] = []
        self.handles: list[int] = []
        self.dests: list[memoryview] = []
        self.tokens: list[int] = []
        self.indices: list[int] = []
        self.sources = sources


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
    try:
        if count == 1:
            matchers[0].fill_bitmask(bitmask, _row_index(rows[0]))  # checks the array and the row
            return
        if count < _BATCH_MIN and count * _cost_us_mean() < _PARALLEL_WORK_MIN_US:
            words = matchers[0].mask_words
            rows_total, _ = _layout(bitmask, words)
            _fill_alone([(m, _checked_row(m, row, words, rows_total)) for m, row in zip(matchers, rows)], bitmask)
            return
        _fill_alone(_fill_groups(matchers, rows, bitmask), bitmask)
    except AttributeError:
        # Checked only here, so that a batch of matchers pays nothing for it.
        for index, matcher in enumerate(matchers):
            if not isinstance(matcher, Matcher):
                raise ArgumentError(f"fill_bitmasks needs Matchers: item {index} is a {type(matcher).__name__}") from None
        raise


def _cost_us_mean() -> float:
    """The mean of the instances' last costs per matcher (µs)."""
    costs = list(_cost_us.values())
    return sum(costs) / len(costs) if costs else _COST_US_UNKNOWN


def _row_index(row: Any) -> int:
    try:
        return int(row.__index__())
    except AttributeError:
        raise ArgumentError(f"rows must be ints, not {type(row).__name__}") from None


def _checked_row(matcher: Matcher, row: Any, words: int, rows_total: int) -> int:
    """`row` as an int inside the array, for a matcher of the batch's width."""
    if type(row) is not int:
        row = _row_index(row)
    if not 0 <= row < rows_total:
        raise ArgumentError(f"row {row} is outside the bitmask's {rows_total} rows")
    if matcher.mask_words != words:
        raise ArgumentError("fill_bitmasks needs matchers of one vocabulary width")
    return row


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
    return int(shape[0]), whole_view(bitmask)


def _fill_groups(matchers: Sequence[Matcher], rows: Sequence[Any], bitmask: Any) -> list[tuple[Matcher, int]]:
    """Fill the batch's rows, several instances at once when that pays (`_threads_for`);
    the pairs to fill on their own (busy in another thread, failed, moved to another
    instance, or failed in this call).

    The calling thread checks the batch and takes the matchers' locks (`_lock_groups`), then
    prepares each instance's call (`Core.batch_begin`, in the order of the instances'
    serials, so two batches never wait for each other's instances); `_Run` makes the calls
    and copies the rows.
    """
    global _calls
    _calls += 1
    later: list[tuple[Matcher, int]] = []
    locked: list[Any] = []
    first = matchers[0]
    plan = _plans.get(first)
    made: _Plan | None = None
    try:
        groups = plan.take(matchers, rows, bitmask, locked) if plan is not None else None
        if groups is not None:
            words = plan.words
        else:
            plan = None
            groups, words = _lock_groups(matchers, rows, bitmask, later, locked)
            groups.sort(key=lambda group: group.core.serial)
            if not later:
                plan = made = _Plan(matchers, rows, bitmask, words, locked, groups)
        threads = _threads_for(groups)
        run = _Run(threads, later)
        if threads > 1:
            # The caller's groups come last (the highest serials): it waits in the last one's
            # instance for the helpers (`_Run.wait_in`).
            run.wait_in(groups[-1].core)
        _holding([group.core for group in groups], 0, lambda: _make_calls(run, groups, words, made, later))
    finally:
        for lock in locked:
            try:
                lock.release()
            except RuntimeError:
                pass  # (released already by `batch_take`, which an exception stopped before it forgot it)
        # The plan is kept while every matcher of the batch is filled in its group.
        if later or plan is None:
            _plans.pop(first, None)
        elif plan is made:
            _plans[first] = plan
    return later


def _holding(cores: list[Core], start: int, body: Callable[[], None]) -> None:
    """Run `body` holding the locks of `cores[start:]`, taken in their order, each by a `with`.

    The calling thread holds its batch's instances for the whole fill, the helpers' calls
    included (it waits for them before it lets go). Taken by `acquire()` in `batch_begin` and
    released by `release()` in `batch_finish`, an instance stayed locked for good when an
    exception a signal handler raised (Ctrl-C; it runs in the main thread, after any call
    returns) came between the acquire and the `try` guarding it, or between `batch_begin`
    and the call's registration: every later call on the instance waited forever. A `with`
    leaves no such gap.
    """
    if start == len(cores):
        body()
        return
    with cores[start].lock:
        _holding(cores, start + 1, body)


def _make_calls(run: _Run, groups: list[_Group], words: int, made: _Plan | None, later: list[tuple[Matcher, int]]) -> None:
    """Prepare each group's call and make the calls (`_Run`), the instances' locks held."""
    try:
        for index, group in enumerate(groups):
            core = group.core
            if core.poisoned:
                later.extend(group.pairs)
                continue
            # The caller's groups come last (the highest serials): a helper's call is
            # prepared and handed over first. The tokens the matchers' last consumes left
            # pending are consumed in the same call, on the thread that fills the instance.
            home = (len(groups) - 1 - index) % run.threads
            tokens = group.tokens
            pending = tokens if tokens.count(-1) != len(tokens) else None
            if pending is not None:
                batch_mark(group.pairs)
            try:
                call = core.batch_begin(group.handles, words, group.dests, pending, group.sources)
            except (CoreTrap, LimitError):
                # Another thread's failure retired the instance since the check above (or
                # preparing the call failed): its matchers move on, or fail, on their own.
                later.extend(group.pairs)
                continue
            if made is not None:
                made.groups[index].sources = call.sources
            run.add(core, call, group.pairs, home)
        run.finish()
    finally:
        run.close()  # (no helper is left in an instance once the locks are let go)


class _Plan:
    """A batch as `_lock_groups` split it, kept for the next call.

    A serving loop fills the same matchers, rows and array at every step until a request comes
    or goes. When the next call's batch is that one, the plan tries the matchers' locks (one
    C-level pass, `map`) and re-reads their pending tokens: ~0.3 µs a matcher, where checking
    and grouping the batch again costs ~0.75. A matcher's instance and handle change only when
    its instance is retired (`Matcher._migrate`, `reset` after a failure), and a retired
    instance stays poisoned, so `_fill_groups`' check of each group's instance covers them: its
    matchers are filled on their own and the plan is dropped. The plan holds no matcher (weak
    references), so a finished request's matcher is freed as usual; it holds the array (its
    row views), as `Matcher` holds its last one.
    """

    __slots__ = ("refs", "rows", "bitmask", "shape", "words", "locks", "groups")

    def __init__(self, matchers: Sequence[Matcher], rows: Sequence[Any], bitmask: Any, words: int,
                 locks: list[Any], groups: list[_Group]) -> None:
        self.refs = list(map(weakref.ref, matchers))
        self.rows = list(rows)
        self.bitmask = bitmask
        self.shape = getattr(bitmask, "shape", None)
        self.words = words
        self.locks = list(locks)  # every matcher's, in batch order (all were taken)
        self.groups = [_PlannedGroup(group) for group in groups]

    def take(self, matchers: Sequence[Matcher], rows: Sequence[Any], bitmask: Any, locked: list[Any]) -> list[_Group] | None:
        """The groups of this batch with their locks taken (appended to `locked`) and pending
        tokens read, when it is the plan's batch and every lock is free; else None."""
        if bitmask is not self.bitmask or getattr(bitmask, "shape", None) != self.shape:
            return None
        if list(map(weakref.ref, matchers)) != self.refs or list(rows) != self.rows:
            return None
        locks = self.locks
        # Each lock taken is recorded in the same C call (`extend` over `filter`): an
        # exception a signal handler raises comes after it returns, when `locked` holds them.
        before = len(locked)
        locked.extend(filter(try_lock, locks))
        if len(locked) - before != len(locks) or any(map(batch_unsettled, matchers)):
            # A matcher busy elsewhere, or left midway by an interrupted call (`Matcher._settle`,
            # on its own): the batch is checked and grouped again.
            for lock in locked[before:]:
                lock.release()
            del locked[before:]
            return None
        return [planned.group(matchers) for planned in self.groups]




class _PlannedGroup:
    """A `_Group` of a plan, without its matchers: where they are in the batch."""

    __slots__ = ("core", "pick", "rows", "handles", "dests", "sources")

    def __init__(self, group: _Group) -> None:
        self.core = group.core
        indices = group.indices
        # itemgetter of one index returns the item, not a tuple of it.
        self.pick: Callable[[Sequence[Matcher]], Any] = (
            operator.itemgetter(*indices) if len(indices) > 1 else (lambda batch, i=indices[0]: (batch[i],))
        )
        self.rows = [row for _, row in group.pairs]
        self.handles = group.handles
        self.dests = group.dests
        self.sources: list[Any] | None = None

    def group(self, matchers: Sequence[Matcher]) -> _Group:
        group = _Group(self.core, self.sources)
        picked = self.pick(matchers)
        group.pairs = list(zip(picked, self.rows))
        group.handles = self.handles
        group.dests = self.dests
        group.tokens = list(map(batch_pending, picked))
        return group


# The plan of the last batch filled, by its first matcher (so a plan lives no longer than it).
_plans: weakref.WeakKeyDictionary[Matcher, _Plan] = weakref.WeakKeyDictionary()


def _lock_groups(
    matchers: Sequence[Matcher], rows: Sequence[Any], bitmask: Any, later: list[tuple[Matcher, int]], locked: list[Any]
) -> tuple[list[_Group], int]:
    """Check the batch and lock its matchers, split by instance: the groups (`_Group`, in
    no particular order) and the row width in words. A matcher that is busy in another
    thread or failed goes to `later`, unlocked; each lock taken is appended to `locked`.
    Locks are only tried, never waited for, so two batch fills sharing matchers cannot
    deadlock. One pass, ~0.6 µs a matcher.

    Raises:
        ArgumentError: mismatched widths, a row outside the array, a bad array (nothing has
            been filled).
    """
    words = matchers[0].mask_words
    rows_total, flat = _layout(bitmask, words)
    row_bytes = 4 * words
    groups: dict[Core, _Group] = {}
    get_group = groups.get
    listed: set[int] = set()
    for index, (matcher, row) in enumerate(zip(matchers, rows)):
        row = _checked_row(matcher, row, words, rows_total)
        # A matcher listed twice is filled once in the batch (its lock is reentrant: taken a
        # second time, the call would consume its pending token twice), again on its own after.
        if id(matcher) in listed:
            later.append((matcher, row))
            continue
        listed.add(id(matcher))
        taken = batch_take(matcher, locked)
        if taken is None:
            later.append((matcher, row))
            continue
        core, handle, pending = taken
        group = get_group(core)
        if group is None:
            group = groups[core] = _Group(core)
        group.pairs.append((matcher, row))
        group.handles.append(handle)
        group.tokens.append(pending)
        group.indices.append(index)
        if flat is not None:
            start = row * row_bytes
            group.dests.append(flat[start : start + row_bytes])
        else:
            group.dests.append(row_view(bitmask, row, words))
    return list(groups.values()), words


def _compute(core: Core, call: BatchCall, batch: list[Any]) -> None:
    """Make one instance's call, and keep its time per matcher as the instance's cost (wall
    time: a thread's CPU clock costs ~0.8 µs a read here, a quarter of a cached mask)."""
    started = time.perf_counter()
    core.batch_compute(call)
    _cost_us[core] = (time.perf_counter() - started) * 1e6 / len(batch)


def _finish(core: Core, call: BatchCall, batch: list[tuple[Matcher, int]], *, copy: bool = True) -> list[tuple[Matcher, int]]:
    """Copy one instance's rows; the pairs to fill on their own. Each matcher
    learns whether its pending token was consumed and whether the core's buffer holds its
    mask (its lock is still held)."""
    bad: list[int] | None = None
    try:
        bad = core.batch_finish(call, copy=copy)
    except TokensieveError:
        pass  # the instance failed: each matcher finds out on its own
    finally:
        if call.error is None:
            batch_settle(batch, call.unconsumed, set(bad) if bad else (), copy and bad is not None)
        else:
            # The call ended in an exception: maybe after the module had consumed the tokens
            # (one a signal handler raised as the call returned), so its statuses are unknown.
            # The matchers stay unsettled: the core's token counts settle them (`Matcher._settle`).
            batch_unknown(batch)
    return batch if bad is None else [batch[i] for i in bad]


def _threads_for(groups: list[_Group]) -> int:
    """How many threads make the calls: one unless there are several instances, the batch's
    expected work (each instance's time per matcher in its last call) is at least
    `_PARALLEL_WORK_MIN_US`, and threads have not been backed off (`_Gain`)."""
    if len(groups) < 2 or _calls < _gain.serial_until:
        return 1
    threads = min(len(groups), _cpu_count(), _THREADS_MAX)
    if threads < 2:
        return 1
    work_us = sum(len(group.pairs) * _cost_us.get(group.core, _COST_US_UNKNOWN) for group in groups)
    return threads if work_us >= _PARALLEL_WORK_MIN_US else 1


class _Run:
    """The calls of one batch fill and the threads that make them.

    Each call has a home thread (the caller, or helper k), so that an instance is filled by
    the same thread at every step and its memory (the matchers' mask buffers, its grammars'
    caches) stays in one core's cache: on this machine a group filled on another core than
    at the last step ran up to 2x slower. A helper's call is handed over as soon as it is
    prepared. A call is made by whichever thread claims it first (an atomic `dict.setdefault`),
    which also copies its rows: the caller makes its own calls,
    then every call no helper has claimed yet (a helper that wakes late, the machine being
    busy, costs no waiting), then waits for the helpers. No instance is released while a
    helper's call on it may still run (`close`).

    How the caller waits: blocked on a helper's lock, it ran again ~40 µs after the helper
    released it (an idle vCPU of this VM halts, and waking it goes through the host), and a
    thread that wants the GIL while the other holds it sleeps the same way. So it waits inside
    the instance of its last group (`_wait`: `Core.spin_until`, the GIL released) until every
    helper has bumped a word there, the last thing a helper does, and ~5 µs more, by which time
    the helper is back in its queue without the GIL. Measured against waiting on the locks, in
    the same process, steps interleaved (64 MaskBench requests, 40 steps x 2 rounds, 5 runs):
    faster in 50-62 of 80 steps, by a median 4-26 µs a step (~5%), with or without the caller
    reading the whole array after each fill. The wait is bounded (`_SPIN_READS`); a later
    helper is waited for on its lock.
    """

    def __init__(self, threads: int, later: list[tuple[Matcher, int]]) -> None:
        self.threads = threads
        self.later = later
        # The calls, each published by one `append` (`add`).
        self.prepared: list[_Prepared] = []
        # Who claimed each call (`_CALLER`, a helper's home, or `_NOBODY` once closed), by one
        # `setdefault`: the claim and its record are one C call, so an exception a signal
        # handler raises in the caller (Ctrl-C) never leaves a call claimed and unrecorded.
        self.owner: dict[int, int] = {}
        self.finished: set[int] = set()  # rows copied
        self.cpu_s: dict[int, float] = {}
        self.ended: dict[int, float] = {}
        self.errors: list[BaseException] = []
        self.started = 0.0
        self.wait_core: Core | None = None
        self.wait_word: Any = None

    def add(self, core: Core, call: BatchCall, batch: list[tuple[Matcher, int]], home: int) -> None:
        index = len(self.prepared)
        lock = None
        if home:
            lock = threading.Lock()
            lock.acquire()
        self.prepared.append(_Prepared(core, call, batch, home, lock))
        if home:
            if not self.started:
                self.started = time.perf_counter()
            _workers.run_on(home - 1, lambda: self._helper(index))

    def _make(self, index: int) -> None:
        core, call, batch, _, _ = self.prepared[index]
        if self.threads < 2:
            _compute(core, call, batch)
            return
        started = _thread_time()
        _compute(core, call, batch)
        self.cpu_s[index] = _thread_time() - started
        self.ended[index] = time.perf_counter()

    def _finish(self, index: int) -> None:
        core, call, batch, _, _ = self.prepared[index]
        # Settled before it is marked: settling again (`close`) is harmless, never settling not.
        self.later.extend(_finish(core, call, batch))
        self.finished.add(index)

    def _helper(self, index: int) -> None:
        home, lock = self.prepared[index].home, self.prepared[index].done
        if self.owner.setdefault(index, home) != home:
            return  # the caller made it (or closed the run)
        try:
            self._make(index)
            self._finish(index)
        except BaseException as error:  # noqa: BLE001 - re-raised by the caller
            self.errors.append(error)
        finally:
            lock.release()  # type: ignore[union-attr] - a helper's call has its lock
            word = self.wait_word
            if word is not None:
                word[0] += 1  # the last thing it does: the caller stops waiting soon after

    def finish(self) -> None:
        """Make the caller's calls, then the unclaimed ones, then wait for the helpers'."""
        count = len(self.prepared)
        homes = [entry.home for entry in self.prepared]
        for index in [i for i in range(count) if not homes[i]] + [i for i in range(count) if homes[i]]:
            if self.owner.setdefault(index, _CALLER) != _CALLER:
                continue
            self._make(index)
            self._finish(index)
        helped = [index for index in range(count) if self.owner[index] != _CALLER]
        if helped:
            self._wait(len(helped))
        for index in helped:
            with self.prepared[index].done:  # type: ignore[union-attr] - until the helper is done (not consumed)
                pass
            if index not in self.finished:
                self._finish(index)
        if self.started and self.ended:
            # The calls' CPU time over the wall time until the last one ended.
            _gain.record(sum(self.cpu_s.values()) / max(max(self.ended.values()) - self.started, 1e-9), _calls)
        if self.errors:
            raise self.errors[0]

    def wait_in(self, core: Core) -> None:
        """Have the caller wait for the helpers in `core` (`_wait`), where linear memory stays
        put (elsewhere it waits on their locks)."""
        try:
            word = core.spin_word()
        except TokensieveError:
            return
        if word is not None:
            word[0] = 0
            self.wait_core = core
            self.wait_word = word

    def _wait(self, helpers: int) -> None:
        """Wait inside `wait_core` (its lock held by this thread: `_holding`), the GIL
        released, until `helpers` helpers have bumped its word, or the reads run out
        (`_SPIN_READS`)."""
        core = self.wait_core
        if core is None:
            return
        try:
            if not core.poisoned:
                core.spin_until(helpers, _SPIN_READS, _SPIN_LINGER)
        except TokensieveError:
            pass  # they are waited for on their locks

    def close(self) -> None:
        """Settle every call not finished yet (its matchers' pending tokens), once no helper
        can be in its call: the caller then lets go of the instances (`_holding`). Safe after
        an exception anywhere in `add` or `finish`: a call nobody claimed is claimed for
        nobody, a helper's is waited for without taking its lock for good (a `with`).

        An exception a signal handler raises while this waits (a second Ctrl-C) would let the
        caller go on, and let go of an instance, while a helper still runs in it: every such
        instance is retired first (no call enters it again; its matchers move on), as after
        a trap in it."""
        try:
            for index, entry in enumerate(self.prepared):
                if self.owner.setdefault(index, _NOBODY) not in (_CALLER, _NOBODY):
                    with entry.done:  # type: ignore[union-attr] - a helper is making it
                        pass
        except BaseException:
            for index, entry in enumerate(self.prepared):
                if self.owner.setdefault(index, _NOBODY) not in (_CALLER, _NOBODY) and entry.done.locked():  # type: ignore[union-attr]
                    entry.core.runtime.retire("a batch fill was interrupted while a helper thread was in this instance")
            raise
        for index, (core, call, batch, _, _) in enumerate(self.prepared):
            if index not in self.finished:
                _finish(core, call, batch, copy=False)


class _Prepared(NamedTuple):
    """A call of a batch fill (`_Run`): its instance, the call, the (matcher, row) pairs, the
    thread it is meant for (0: the caller) and, for a helper's, a lock held until that helper
    is done with it."""

    core: Core
    call: BatchCall
    pairs: list[tuple[Matcher, int]]
    home: int
    done: threading.Lock | None


_CALLER = 0  # `_Run.owner`: the calling thread (helpers are 1, 2, …: their homes)
_NOBODY = -1  # `_Run.owner`: closed before anyone claimed it

# The caller's wait for its helpers (`_Run._wait`). ts_spin_until reads its word ~1.5 times
# a ns here: at most ~270 µs (a later helper is waited for on its lock), then ~5 µs more
# once they are done, as the last helper still holds the GIL for 1-2 µs after bumping it
# (a caller that wanted the GIL then slept, and woke 15-40 µs later).
_SPIN_READS = 400_000
_SPIN_LINGER = 7_500


class _Gain:
    """The moving average of what filling on threads gained (see `_fill_groups`)."""

    def __init__(self) -> None:
        self.average = 2.0
        self.serial_until = 0

    def record(self, gain: float, calls: int) -> None:
        # A stall of both threads (preempted, or the kernel's real-time throttling) reads as
        # a gain near 0 once: clamped, it takes three poor batches in a row to back off.
        self.average = 0.7 * self.average + 0.3 * max(gain, 0.5)
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
    """Helper threads, each with its own job queue (a `queue.SimpleQueue`, the cheapest
    handoff: a helper waits in C without the GIL and wakes in a few µs), so that helper k is
    the same thread at every batch (see `_Run`).

    Started on first use, never stopped; a forked child starts its own.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: list[queue.SimpleQueue[Callable[[], None]]] = []

    def run_on(self, index: int, job: Callable[[], None]) -> None:
        """Have helper thread `index` run `job` (without waiting for it)."""
        if len(self._queues) <= index:
            self._start(index + 1)
        self._queues[index].put(job)

    def _start(self, count: int) -> None:
        with self._lock:
            while len(self._queues) < count:
                jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
                thread = threading.Thread(
                    target=self._work, args=(jobs,), name=f"tokensieve-fill-{len(self._queues)}", daemon=True
                )
                thread.start()
                self._queues.append(jobs)

    @staticmethod
    def _work(jobs: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            jobs.get()()

    @property
    def started(self) -> int:
        """How many helper threads run."""
        return len(self._queues)

    def forget(self) -> None:
        """After a fork: the threads are gone in the child."""
        self._lock = threading.Lock()
        self._queues = []


_workers = _Workers()
_gain = _Gain()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_workers.forget)
