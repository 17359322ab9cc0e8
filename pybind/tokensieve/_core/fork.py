"""What the child of `os.fork` must renew: the locks that threads which are not there held.

After a fork the child has only the thread that forked. A lock another thread held at that
moment is held forever in the child, and the next use of what it guards hangs. Objects with a
`_lock` attribute register here (`renew_lock_after_fork`): in the child, a held lock is
replaced by a new one of its kind. Modules register a hook for their own locks and for what a
held lock says about their state (`after_fork`): the instances (`binding.py`, a store that was
mid-call is retired) and the matchers (`matcher.py`, one that was mid-method fails until
`reset()`) do. The hooks run after the locks are renewed, in the order they registered.
"""

from __future__ import annotations

import os
import threading
import traceback
import weakref
from typing import Any, Callable

_owners: weakref.WeakSet[Any] = weakref.WeakSet()
_hooks: list[Callable[[], None]] = []


def renew_lock_after_fork(owner: Any) -> None:
    """Have the child of a fork replace `owner._lock` if another thread held it."""
    _owners.add(owner)


def after_fork(hook: Callable[[], None]) -> None:
    """Run `hook()` in the child of every fork (after the registered locks are renewed)."""
    _hooks.append(hook)


def renewed(lock: Any) -> Any:
    """`lock` if it is free (the caller of a fork holds none of ours), else a new lock of its
    kind: the thread that held it is not in this process."""
    if lock.acquire(False):
        lock.release()
        return lock
    return threading.Lock() if type(lock) is _LOCK_TYPE else threading.RLock()


_LOCK_TYPE = type(threading.Lock())


def _after_fork_in_child() -> None:
    # Each on its own: one failing must not leave the others' locks held.
    for owner in list(_owners):
        try:
            owner._lock = renewed(owner._lock)
        except Exception:  # noqa: BLE001 - reported as Python reports a failing fork hook
            traceback.print_exc()
    for hook in _hooks:
        try:
            hook()
        except Exception:  # noqa: BLE001
            traceback.print_exc()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
