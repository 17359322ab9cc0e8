"""The core handles of shared objects: a tokenizer's trie and a grammar's compiled form, per
core instance.

A tokenizer or grammar is built in an instance the first time a matcher there needs it, and
shared by every matcher of that instance. The handle is freed when the Python object dies
(queued to the instance, see `Core.free_later`), or with the instance when it is retired: a
handle never keeps its instance alive.
Finalizers do not run at interpreter exit: the instances go away then anyway.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable

from .._errors import ArgumentError
from .fork import renew_lock_after_fork

if TYPE_CHECKING:
    from . import Core


class CoreHandles:
    """An object's handles, one per core instance, created on demand (thread safe)."""

    __slots__ = ("kind", "_by_core", "_lock", "__weakref__")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._by_core: weakref.WeakKeyDictionary[Core, int] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        # A build another thread was running when the process forked did not finish in the
        # child (its instance is retired there): the handle is made again on next use.
        renew_lock_after_fork(self)

    def built_in(self, core: Core) -> bool:
        """Has the object a handle in `core`?"""
        return core in self._by_core

    def get(self, owner: Any, core: Core, build: Callable[[Core], int]) -> int:
        """The handle of `owner` in `core`, built by `build(core)` the first time."""
        handle = self._by_core.get(core)
        if handle is not None:
            return handle
        with self._lock:
            handle = self._by_core.get(core)
            if handle is None:
                handle = build(core)
                self._by_core[core] = handle
                # The finalizer holds the instance weakly: a retired instance (and its linear
                # memory, a trie of several MB) must not live as long as a tokenizer or grammar
                # that was built in it.
                finalizer = weakref.finalize(owner, _free_later, weakref.ref(core), self.kind, handle)
                finalizer.atexit = False
        return handle


def _free_later(core_ref: weakref.ref[Core], kind: str, handle: int) -> None:
    """Queue `handle` for freeing in its instance, if the instance still exists."""
    core = core_ref()
    if core is not None:
        core.free_later(kind, handle)


def token_has_extension(tokenizer: Any, data: bytes) -> bool:
    """Does some token of `tokenizer` strictly extend `data`? Answered by the core's trie."""
    from . import default_pool

    core = default_pool().first()
    return core.tokenizer_has_extension(tokenizer.core_handle(core), bytes(data))


def token_heal_position(tokenizer: Any, data: bytes, start: int = 0) -> int:
    """The earliest offset `i >= start` such that some token strictly extends `data[i:]`;
    `len(data)` when none (`tokenize_partial`'s healing, one call into the core)."""
    from . import default_pool

    if not 0 <= start <= len(data):
        raise ArgumentError(f"start {start} is outside 0..{len(data)}")
    core = default_pool().first()
    return core.tokenizer_heal_position(tokenizer.core_handle(core), bytes(data), start)
