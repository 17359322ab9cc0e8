"""The health of one core instance, shared by the callables of both backends."""

from __future__ import annotations

from ..._errors import CoreTrap


class Health:
    """Poisoned once a call into the instance failed (a trap, fuel or time run out) or the
    instance was retired from outside; every later call raises `CoreTrap` without entering
    the module. Each backend's callables hold their instance's health object, not the runtime,
    so that dropping a runtime frees its instance at once (no reference cycle)."""

    __slots__ = ("poisoned", "poison_reason")

    def __init__(self) -> None:
        self.poisoned = False
        self.poison_reason = ""

    def retire(self, reason: str) -> None:
        """Poison the instance from outside; later calls raise `CoreTrap` naming `reason`."""
        if not self.poisoned:
            self.poison_reason = reason
            self.poisoned = True

    def poisoned_error(self, name: str) -> CoreTrap:
        """The error for a call on a poisoned instance."""
        error = CoreTrap(
            f"cannot call {name}: this runtime is poisoned by an earlier failure "
            f"({self.poison_reason}); create a new runtime (a new Matcher)"
        )
        error.instance_retired = True  # raised before entering the module: not this call's doing
        return error
