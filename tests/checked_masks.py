"""Oracle answers computed once per case and tokenizer, shared by both module builds.

The oracles (`tests/oracle.py`, `tests/reference_cfg.py`) are slow Python, and the two builds of
the core (release and the bounds-checked safe build) must give byte-identical masks. So the
first build to reach a step checks its mask against the oracle and records the mask's bytes
under a key naming the case, tokenizer, text and step (never the build); the other build
compares its mask with those bytes. Equal bytes mean the same answer the oracle already
checked; different bytes fail, after the oracle has had its say on this build's mask.

The record lives for the test process: under pytest-xdist each worker has its own, and
`--dist loadfile` (the README's test command) runs every test of a file, so both builds of a
test, in one worker. A key seen by only one build is checked by the oracle, as before.
"""

from __future__ import annotations

from typing import Callable, Hashable

import numpy as np

_CHECKED: dict[Hashable, bytes] = {}


def check_once(key: Hashable, mask: np.ndarray | bytes, verify: Callable[[], object]) -> None:
    """Run `verify()` (the oracle's check of `mask`) unless a mask under `key` was checked already.

    Args:
        key: names the case, tokenizer, text and step; never the module build.
        mask: the mask the build under test computed (bytes or a numpy array).
        verify: raises when the oracle disagrees with `mask`; it must not change state the
            caller reads afterwards (a shared random generator, say), since it may be skipped.

    Raises:
        AssertionError: from `verify`, or when `mask` differs from the mask recorded for `key`.
    """
    data = mask if isinstance(mask, bytes) else np.ascontiguousarray(mask).tobytes()
    seen = _CHECKED.get(key)
    if seen is None:
        verify()
        _CHECKED[key] = data
        return
    if seen == data:
        return
    verify()
    words = np.frombuffer(seen, dtype=np.uint8) ^ np.frombuffer(data, dtype=np.uint8)
    differ = np.flatnonzero(np.unpackbits(words, bitorder="little"))[:10].tolist()
    raise AssertionError(f"{key}: the two module builds give different masks (tokens {differ} differ)")
