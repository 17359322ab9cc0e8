"""The core's slow path as the reference for its fast ones: the mask the whole trie's walk
gives from the real lexer state, no slice and no clamped state (`Core.debug_slices(False)`,
`Core.debug_clamp(False)`), computed on a fork of the matcher so its state is untouched."""

from __future__ import annotations

from typing import Any

import numpy as np


def mask_bits(m: Any, vocab_size: int) -> np.ndarray:
    """The matcher's mask as one 0/1 byte per token id."""
    return np.unpackbits(m.compute_bitmask().view(np.uint8), bitorder="little")[:vocab_size].copy()


def masks_fast_and_walked(m: Any, vocab_size: int, *, keep_slices: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(the mask as the matcher computes it, the whole trie's walk from the same position);
    with `keep_slices`, the reference differs only in its unclamped state (cheaper, for tests
    of clamping alone)."""
    fast = mask_bits(m, vocab_size)
    core = m._core
    slices, clamp = core.debug_slices(keep_slices), core.debug_clamp(False)
    try:
        walked = mask_bits(m.fork(), vocab_size)
    finally:
        core.debug_slices(slices)
        core.debug_clamp(clamp)
    return fast, walked


def expect_walked_masks_along(m: Any, tok: Any, ids: list[int]) -> list[np.ndarray]:
    """Consume `ids` one by one, checking before each that the mask equals the whole trie's
    walk and allows the token; returns the masks."""
    masks = []
    for i, t in enumerate(ids):
        fast, walked = masks_fast_and_walked(m, tok.vocab_size)
        diff = np.flatnonzero(fast != walked).tolist()
        assert not diff, f"after {tok.decode(ids[:i])!r}: {[(tok.token_bytes(d), int(fast[d])) for d in diff[:8]]}"
        assert fast[t], f"{tok.token_bytes(t)!r} refused after {tok.decode(ids[:i])!r}"
        assert m.consume_token(t)
        masks.append(fast)
    return masks
