"""What the child of `os.fork` must renew: the locks that threads which are not there held.

After a fork the child has only the thread that forked. A lock another thread held at that
moment is held forever in the child, and the next use of what it guards hangs. An object
registers the attribute holding its lock (`renew_lock_after_fork`), a module its global lock
(`renew_global_lock_after_fork`): in the child, a held lock is replaced by a new one of its
kind, and the object's `held` callback says what the held lock meant for its state (an
instance that was mid-call is retired, `binding.py` and the runtime's store; a matcher that was
mid-method fails until `reset()`, `matcher.py`). Other work registers a hook (`after_fork`,
the epoch tickers); hooks run after every lock is renewed, in the order they registered.
"""

from __future__ import annotations

import os
import threading
import traceback
import weakref
from typing import Any, Callable

# Why an instance whose lock another thread held is retired in the child (`binding.py`'s
# instance lock and the runtime's store lock both guard its calls).
MID_CALL_AT_FORK = "a call was running in another thread when the process forked"

# Owner → (the attribute holding its lock, what to do when another thread held it).
_owners: weakref.WeakKeyDictionary[Any, tuple[str, Callable[[Any], None] | None]] = weakref.WeakKeyDictionary()
_hooks: list[Callable[[], None]] = []


def renew_lock_after_fork(owner: Any, attribute: str = "_lock", held: Callable[[Any], None] | None = None) -> None:
    """Have the child of a fork replace `owner.<attribute>` if another thread held it, then
    call `held(owner)`."""
    _owners[owner] = (attribute, held)


def renew_global_lock_after_fork(namespace: dict[str, Any], name: str) -> None:
    """The same for a module's lock `namespace[name]` (pass the module's `globals()`)."""

    def renew() -> None:
        namespace[name] = _renewed(namespace[name])

    _hooks.insert(0, renew)  # before the other hooks, as the objects' locks


def after_fork(hook: Callable[[], None]) -> None:
    """Run `hook()` in the child of every fork (after the registered locks are renewed)."""
    _hooks.append(hook)


def _renewed(lock: Any) -> Any:
    """`lock` if it is free (the caller of a fork holds none of ours), else a new lock of its
    kind: the thread that held it is not in this process."""
    if lock.acquire(False):
        lock.release()
        return lock
    return threading.Lock() if type(lock) is _LOCK_TYPE else threading.RLock()


_LOCK_TYPE = type(threading.Lock())


def _after_fork_in_child() -> None:
    # Each on its own: one failing must not leave the others' locks held.
    for owner, (attribute, held) in list(_owners.items()):
        try:
            lock = getattr(owner, attribute)
            renewed = _renewed(lock)
            if renewed is not lock:
                setattr(owner, attribute, renewed)
                if held is not None:
                    held(owner)
        except Exception:  # noqa: BLE001 - reported as Python reports a failing fork hook
            traceback.print_exc()
    for hook in list(_hooks):
        try:
            hook()
        except Exception:  # noqa: BLE001
            traceback.print_exc()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
