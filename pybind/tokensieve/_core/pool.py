"""Core instances: how many, with which limits, where a new matcher goes, what replaces a dead one.

A process keeps a small pool of core instances (see docs/runtime.md). Each instance is one
wasmtime store with its own linear memory; a tokenizer is loaded into each instance that
serves it, a grammar compiled into each instance that runs it, and a matcher lives in one
instance (its forks stay there). Calls on one instance are serialized by its lock; calls on
different instances run in parallel (wasmtime releases the GIL), which is what a batch fill
uses.

Failure scope: a trap, deadline or fuel exhaustion poisons its instance only. The pool puts a
fresh instance with the same options in its slot; the matcher whose call failed raises and
stays failed, and every other matcher of the dead instance moves to a healthy one on its next
call by replaying its tokens (`Matcher`), so no other request notices more than a short delay.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from dataclasses import dataclass, replace
from typing import Any, Callable, Final

from .._errors import ArgumentError
from .binding import Core
from .fork import renew_global_lock_after_fork, renew_lock_after_fork
from .runtime import default_variant

_DEADLINE_DEFAULT_S: Final = 1.0
_INSTANCES_MAX_DEFAULT: Final = 4
# Each instance holds its own copy of every tokenizer's trie (10-70 MB for a 128k vocabulary):
# past this, `instances` is a mistake (a million made one per new matcher until memory ran out).
_INSTANCES_MAX: Final = 256


def _on_pyodide() -> bool:
    return sys.platform == "emscripten"


@dataclass(frozen=True)
class CoreOptions:
    """How core instances are made. Pass to `tokensieve.configure` (the default pool) or to a
    `CorePool`.

    Attributes:
        instances: core instances in the pool (default: one per CPU, at most 4; always 1 under
            Pyodide). Each holds its own copy of every tokenizer trie it serves (Llama-3: about
            6 MB with its slices).
        deadline_s: wall-clock bound of one call into an instance (wasmtime's epoch
            interruption, 10 ms resolution; default 1 s, a backstop behind the core's own work
            limits). A call past it raises `LimitError` and retires the instance. None: no
            deadline. Not available under Pyodide.
        memory_limit_bytes: cap on an instance's linear memory (default 4 GiB, all of wasm32).
            Growth past it is an out-of-memory `LimitError`, never a crash. Not under Pyodide.
        fuel_per_call: optional wasm instruction budget per call (wasmtime fuel; slows every
            call a little). Not under Pyodide.
        variant: `"release"` or `"safe"` (bounds-checked) build of the core; default
            `$TOKENSIEVE_WASM_VARIANT`, else release.
    """

    instances: int | None = None
    deadline_s: float | None = _DEADLINE_DEFAULT_S
    memory_limit_bytes: int | None = None
    fuel_per_call: int | None = None
    variant: str | None = None

    def __post_init__(self) -> None:
        if self.instances is not None and (
            not isinstance(self.instances, int) or isinstance(self.instances, bool) or not 1 <= self.instances <= _INSTANCES_MAX
        ):
            raise ArgumentError(f"CoreOptions.instances must be an int from 1 to {_INSTANCES_MAX}, not {self.instances!r}")
        if self.deadline_s is not None and not (isinstance(self.deadline_s, (int, float)) and self.deadline_s > 0 and math.isfinite(self.deadline_s)):
            raise ArgumentError(f"CoreOptions.deadline_s must be a positive number of seconds or None, not {self.deadline_s!r}")
        if self.memory_limit_bytes is not None and (not isinstance(self.memory_limit_bytes, int) or self.memory_limit_bytes <= 0):
            raise ArgumentError(f"CoreOptions.memory_limit_bytes must be a positive int, not {self.memory_limit_bytes!r}")
        if self.fuel_per_call is not None and (not isinstance(self.fuel_per_call, int) or self.fuel_per_call <= 0):
            raise ArgumentError(f"CoreOptions.fuel_per_call must be a positive int, not {self.fuel_per_call!r}")

    def instance_count(self) -> int:
        if _on_pyodide():
            return 1
        return self.instances or max(1, min(os.cpu_count() or 1, _INSTANCES_MAX_DEFAULT))

    def for_platform(self) -> CoreOptions:
        """These options as the current backend can honour them.

        Under Pyodide the default deadline is dropped (the browser's engine has no such hook);
        an explicit one, a memory cap, fuel or more than one instance is refused.
        """
        if not _on_pyodide():
            return self
        for name, value in (("memory_limit_bytes", self.memory_limit_bytes), ("fuel_per_call", self.fuel_per_call)):
            if value is not None:
                raise ArgumentError(f"CoreOptions.{name} is only supported under wasmtime; under Pyodide leave it unset")
        if self.deadline_s not in (None, _DEADLINE_DEFAULT_S):
            raise ArgumentError("CoreOptions.deadline_s is only supported under wasmtime; under Pyodide leave it unset")
        if self.instances not in (None, 1):
            raise ArgumentError("under Pyodide there is one core instance: leave CoreOptions.instances unset")
        return replace(self, deadline_s=None)


def new_core(options: CoreOptions) -> Core:
    """A fresh instance with `options`."""
    from .runtime import load_runtime

    options = options.for_platform()
    runtime = load_runtime(
        options.variant,
        memory_limit_bytes=options.memory_limit_bytes,
        fuel_per_call=options.fuel_per_call,
        epoch_deadline_s=options.deadline_s,
    )
    return Core(runtime, options)


class CorePool:
    """A fixed number of core instance slots, filled lazily, refilled when an instance dies.

    Safe to use from several threads.
    """

    def __init__(self, options: CoreOptions | None = None) -> None:
        self.options = (options or CoreOptions()).for_platform()
        self._slots: list[Core | None] = [None] * self.options.instance_count()
        self._lock = threading.Lock()
        self.replaced = 0
        renew_lock_after_fork(self)

    def __repr__(self) -> str:
        return f"<CorePool {len(self._slots)} slots, {self.options}>"

    def cores(self) -> list[Core]:
        """The live instances (slots not created yet or dead are left out)."""
        with self._lock:
            return [c for c in self._slots if c is not None and not c.poisoned]

    def instances(self) -> list[Core]:
        """Every slot's healthy instance, made now where a slot is empty or its instance dead
        (what `Tokenizer.prepare` builds in)."""
        with self._lock:
            return [self._slot_core(index) for index in range(len(self._slots))]

    def _slot_core(self, index: int) -> Core:
        """The healthy instance in slot `index`, made or remade if needed (pool lock held)."""
        core = self._slots[index]
        if core is None or core.poisoned:
            if core is not None:
                self.replaced += 1
            core = self._slots[index] = new_core(self.options)
        return core

    def place(self, prefer: Callable[[Core], bool] | None = None) -> Core:
        """The instance a new matcher goes to: an empty slot first, else one with the fewest
        matchers, among those one that `prefer` accepts if any (the instances where the
        matcher's grammar and tokenizer are built already: placed elsewhere, a grammar is
        compiled again in that instance, ~0.1 ms at MaskBench's median and up to seconds)."""
        with self._lock:
            for index, core in enumerate(self._slots):
                if core is None or core.poisoned:
                    return self._slot_core(index)
            fewest = min(core.matcher_count for core in self._slots)  # type: ignore[union-attr]
            ties = [core for core in self._slots if core.matcher_count == fewest]  # type: ignore[union-attr]
            if prefer is not None:
                for core in ties:
                    if prefer(core):  # type: ignore[arg-type]
                        return core  # type: ignore[return-value]
            return ties[0]  # type: ignore[return-value]

    def least_loaded(self) -> Core:
        """The live instance a matcher would go to next if no slot were empty (the first
        slot's while none is live): where a new grammar is compiled, so that its first matcher
        finds it built."""
        with self._lock:
            live = [core for core in self._slots if core is not None and not core.poisoned]
            if not live:
                return self._slot_core(0)
            return min(live, key=lambda core: core.matcher_count)

    def replacement(self, dead: Core) -> Core:
        """A healthy instance for the matchers of `dead`: the instance now in its slot."""
        with self._lock:
            for index, core in enumerate(self._slots):
                if core is dead:
                    return self._slot_core(index)
            return self._slot_core(min(range(len(self._slots)), key=lambda i: self._slots[i].matcher_count if self._slots[i] is not None else -1))  # type: ignore[union-attr]

    def first(self) -> Core:
        """An instance for work that is not a matcher's (tokenizer questions, tests)."""
        with self._lock:
            return self._slot_core(0)


_default_options = CoreOptions()
_default_pools: dict[str, CorePool] = {}
_default_lock = threading.Lock()
renew_global_lock_after_fork(globals(), "_default_lock")


def default_pool() -> CorePool:
    """The pool `Matcher` uses unless given another (made on first use).

    One per core variant: with `CoreOptions.variant` unset, the variant is read from
    `$TOKENSIEVE_WASM_VARIANT` at each call, so tests can switch builds.
    """
    variant = _default_options.variant or default_variant()
    pool = _default_pools.get(variant)
    if pool is None:
        with _default_lock:
            pool = _default_pools.get(variant)
            if pool is None:
                pool = _default_pools[variant] = CorePool(replace(_default_options, variant=variant))
    return pool


def configure(options: CoreOptions | None = None, **fields: Any) -> CoreOptions:
    """Set how the default pool's core instances are made; returns the options now in force.

    `tokensieve.configure(deadline_s=0.2, instances=2)` or `configure(CoreOptions(...))`.
    Matchers created afterwards use a new default pool; existing ones keep their instances.

    Raises:
        ValueError: an option is invalid or not available on this platform.
        TypeError: an unknown option name.
    """
    global _default_options
    base = options or CoreOptions()
    unknown = sorted(set(fields) - set(CoreOptions.__dataclass_fields__))
    if unknown:
        raise TypeError(f"unknown core option(s) {unknown}; the options are {sorted(CoreOptions.__dataclass_fields__)}")
    chosen = replace(base, **fields).for_platform()
    with _default_lock:
        _default_options = chosen
        _default_pools.clear()
    return chosen
