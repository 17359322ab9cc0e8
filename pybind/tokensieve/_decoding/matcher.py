"""`Matcher`: one decoding position of a grammar over a tokenizer, driven in the core.

A matcher lives in one core instance of its pool (`_core/pool.py`); its forks stay there. It
keeps the tokens it consumed (a list of ints), which is what lets it survive the death of its
instance: when another request's grammar traps or runs past its deadline there, the instance is
retired, and this matcher's next call re-creates it on a healthy instance and replays its
tokens. The matcher whose own call killed an instance raises and stays failed until `reset`.

Every public method holds the matcher's (reentrant) lock, so a matcher may be shared between
threads: calls are serialized. Calls on matchers of different instances run in parallel.
"""

from __future__ import annotations

import operator
import threading
import weakref
from typing import Any, Callable, Container, Sequence, TypeVar

from .._core import Core, CorePool, default_pool
from .._core.fork import renew_lock_after_fork
from .._errors import ArgumentError, CoreTrap, LimitError, TokensieveError
from .._grammar.grammar import Grammar
from .._tokenizer.tokenizer import Tokenizer

_T = TypeVar("_T")

# Moves of a matcher whose replacement instance another thread's failure retired in turn
# (`Matcher._migrate`): each retirement needs a failing call, so a few is plenty.
_MIGRATE_ATTEMPTS = 8
# Tokens replayed per call when a matcher moves: each call stays within one call's deadline,
# however long the matcher's history (a 4,000-token output replayed in one call could pass it).
_REPLAY_CHUNK = 64


def _fail_after_fork(matcher: Matcher) -> None:
    """In the child of `os.fork`, a matcher whose lock another thread held (`fork.py`) was in
    the middle of a method (its tokens, its pending token half updated): it fails with a clear
    error until `reset()`, instead of waiting forever for its lock."""
    matcher._failure = lambda: CoreTrap(
        "this matcher was in use by another thread when the process forked; reset() it or create a new one"
    )


def _release(core: Core, handle: int) -> None:
    core.matcher_count -= 1
    core.free_later("matcher", handle)

# The longest draft `fill_draft_masks` takes: its masks are one row each (16 kB for a 128k
# vocabulary), in the caller's array and in the core (a draft of 100,000 tokens asked for
# 1.6 GB of each). Speculative drafts are 1-64 tokens.
DRAFT_TOKENS_MAX = 4096


class Matcher:
    """Tracks one output against a grammar and computes which tokens may come next.

    A token is allowed when the output so far plus the token's bytes can still be completed to a
    string of the grammar. EOS ids are allowed exactly when the output may end here; consuming
    one stops the matcher. After that the mask still allows EOS (a finished request's row in a
    batch stays a valid mask), while consuming refuses every token, EOS included, and leaves the
    state as it is; `rollback(1)` undoes the EOS. Special tokens (other than EOS) and ids beyond the tokenizer's own
    (up to `vocab_size`) are never allowed.

    Most methods are one call into the WebAssembly core. Safe to share between threads (calls
    are serialized).

    Args:
        tokenizer: the model's tokenizer (a `tokensieve.Tokenizer`; for a transformers
            tokenizer, `Tokenizer.from_hf(it)`).
        grammar: what the output must follow.
        vocab_size: the model's logits width, when it is not the tokenizer's: masks are this
            many bits; ids past the tokenizer's are never allowed, and a narrower width leaves
            out the tokenizer's ids at or past it (Llama-3.2 Vision's `<|image|>`). Matchers of
            one width share one trie per core instance.
        pool: the core instances to live in (default: `tokensieve.configure`'s pool).
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        grammar: Grammar,
        *,
        vocab_size: int | None = None,
        pool: CorePool | None = None,
    ) -> None:
        if not isinstance(tokenizer, Tokenizer):
            hint = (
                "; wrap it with tokensieve.Tokenizer.from_hf(tokenizer)"
                if hasattr(tokenizer, "backend_tokenizer") or hasattr(tokenizer, "convert_ids_to_tokens")
                else ""
            )
            raise ArgumentError(f"Matcher needs a tokensieve.Tokenizer, not {type(tokenizer).__name__}{hint}")
        if not isinstance(grammar, Grammar):
            raise ArgumentError(f"Matcher needs a tokensieve.Grammar, not {type(grammar).__name__}")
        if vocab_size is not None:
            tokenizer = tokenizer.with_vocab_size(_index(vocab_size, "vocab_size"))
        self.tokenizer = tokenizer
        self.grammar = grammar
        self.vocab_size: int = tokenizer.vocab_size
        self.mask_words: int = (self.vocab_size + 31) // 32
        self._pool = pool or default_pool()
        self._lock = threading.RLock()
        self._tokens: list[int] = []
        # A consumed token not yet applied in the core (-1: none), see `consume_token`, and
        # whether the core's mask buffer holds the mask at the current position.
        self._pending = -1
        self._mask_here = False
        # EOS is never left pending: after a consumed EOS the mask still allows EOS (a
        # finished row stays a valid mask) while consuming refuses it.
        self._eos = frozenset(tokenizer.eos_token_ids)
        self._failure: Callable[[], TokensieveError] | None = None
        # What a method that changes the core's state and then this object's was doing, until
        # both are done (`_settle`); None when they agree.
        self._unsettled: tuple[str, Any] | None = None
        self._consuming = -1  # the token of a one-token consume under way (`_CONSUMING`)
        self._last_dest: tuple[Any, int, memoryview] | None = None
        self._last_rows: tuple[Any, memoryview, int] | None = None
        self._finalizer: weakref.finalize | None = None
        renew_lock_after_fork(self, "_lock", _fail_after_fork)
        self._core: Core
        self._handle: int
        self._attach(*self._place())

    def __repr__(self) -> str:
        return f"<Matcher {self.grammar!r} tokens={len(self._tokens)}>"

    def __reduce__(self) -> tuple[Callable[..., Matcher], tuple[Any, ...]]:
        """Pickle (multiprocessing, Ray, `copy.deepcopy`) the tokenizer at the matcher's
        width, the grammar and the tokens consumed: the copy is a new matcher (in the default
        pool) that consumes them again, in one call."""
        with self._lock:
            if self._unsettled is not None:
                self._settle()
            return _restored_matcher, (self.tokenizer, self.grammar, list(self._tokens))

    # -- placement and failure scope -------------------------------------------------------

    def _place(self) -> tuple[Core, int]:
        """A fresh core matcher on the instance the pool chooses; on the next one when another
        thread's failure retires the chosen instance first (a call refused with
        `instance_retired`), at most `_MIGRATE_ATTEMPTS` times."""
        for attempt in range(_MIGRATE_ATTEMPTS):
            try:
                return self._create(self._pool.place(self.grammar.built_in))
            except (CoreTrap, LimitError) as err:
                if not getattr(err, "instance_retired", False) or attempt + 1 == _MIGRATE_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    def _create(self, core: Core) -> tuple[Core, int]:
        """A fresh core matcher for this tokenizer and grammar in `core`."""
        return core, core.matcher_new(self.tokenizer.core_handle(core), self.grammar.core_handle(core))

    def _attach(self, core: Core, handle: int) -> None:
        if self._finalizer is not None:
            self._finalizer()  # release the previous core matcher (queued on its instance)
        self._core, self._handle = core, handle
        core.matcher_count += 1
        self._finalizer = weakref.finalize(self, _release, core, handle)
        self._finalizer.atexit = False

    def _migrate(self) -> None:
        """Re-create this matcher on a healthy instance and replay its tokens (its instance was
        retired because of another matcher's failure).

        The replacement may itself be retired by another thread's failure before or while
        this matcher moves there (a call refused with `instance_retired`); the move is then
        made again to the next replacement, at most `_MIGRATE_ATTEMPTS` times. A failure of
        this matcher's own replay (a trap, the deadline) fails the matcher, as a failing call
        does: it is not tried again on instance after instance.
        """
        dead = self._core
        for attempt in range(_MIGRATE_ATTEMPTS):
            core = self._pool.replacement(dead)
            handle = None
            try:
                core, handle = self._create(core)
                tokens = self._tokens
                for start in range(0, len(tokens), _REPLAY_CHUNK):
                    chunk = tokens[start : start + _REPLAY_CHUNK]
                    if core.matcher_consume_tokens(handle, chunk) != len(chunk):
                        raise TokensieveError("internal: replaying a matcher's tokens on a new core instance failed")
            except BaseException as err:
                if handle is not None:
                    core.free_later("matcher", handle)
                if not isinstance(err, (CoreTrap, LimitError)):
                    raise
                if getattr(err, "instance_retired", False) and attempt + 1 < _MIGRATE_ATTEMPTS:
                    dead = core  # another thread's failure retired the replacement: the next one
                    continue
                self._failed(core, err)
                raise
            self._attach(core, handle)
            self._pending = -1  # replayed with the others
            self._mask_here = False
            return

    def _live_core(self) -> Core:
        """The healthy instance this matcher lives in (moving it there first if needed)."""
        with self._lock:
            if self._failure is not None:
                raise self._failure()
            if self._core.poisoned:
                self._migrate()
            return self._core

    def _run(self, call: Callable[[Core, int], _T]) -> _T:
        """Run `call(core, handle)` on a live instance, under the matcher's lock, after applying
        a pending token; the core's mask buffer no longer counts as this position's mask."""
        with self._lock:
            if self._unsettled is not None:
                self._settle()
            if self._failure is not None:
                raise self._failure()
            self._mask_here = False
            for attempt in range(_MIGRATE_ATTEMPTS):
                if self._core.poisoned:
                    self._migrate()
                core = self._core
                try:
                    if self._pending >= 0:
                        self._apply_pending(core)
                    return call(core, self._handle)
                except (CoreTrap, LimitError) as err:
                    if not self._failed(core, err) and attempt + 1 < _MIGRATE_ATTEMPTS:
                        continue
                    raise
            raise AssertionError("unreachable")

    def _apply_pending(self, core: Core) -> None:
        """Consume the pending token in the core (lock held). When that fails (a limit), the
        token is dropped, as if `consume_token` had raised."""
        self._unsettled = _APPLYING
        try:
            accepted = core.matcher_consume_token(self._handle, self._pending)
        except (CoreTrap, LimitError):
            self._drop_pending(core)
            raise
        if not accepted:
            raise self._pending_refused(core)
        self._pending = -1
        self._unsettled = None

    def _pending_refused(self, core: Core) -> TokensieveError:
        """The core refused the pending token, which the last mask allowed: a bug; the token
        is dropped."""
        token = self._pending
        self._drop_pending(core)
        return TokensieveError(
            f"the grammar refused token {token}, which its last mask allowed: after a call on this matcher "
            "was interrupted (an exception a signal handler raised, such as KeyboardInterrupt), reset() "
            "it; otherwise this is a bug, please report it with the grammar"
        )

    def _drop_pending(self, core: Core) -> None:
        """After a call carrying the pending token failed at a limit: forget the token unless
        the core consumed it (its token count says which). On a poisoned instance nothing
        changes: the matcher either moves (`_migrate` replays every token, this one too) or
        stays failed until `reset`."""
        if core.poisoned:
            return
        if core.matcher_token_count(self._handle) != len(self._tokens):
            self._tokens.pop()
        self._pending = -1

    def _settle(self) -> None:
        """Make this object agree with the core again after a method was left between changing
        the core's state and its own (lock held).

        Only an exception raised by a signal handler (KeyboardInterrupt, a timeout) can do that:
        it comes after any call returns, so between the core's consume and the record of the
        token here, or the pending token's apply and its clearing. The core's token count says
        how far the core got (`_unsettled` says what was under way); a state it cannot explain
        fails the matcher until `reset`. The mask buffer no longer counts as this position's."""
        kind, argument = self._unsettled  # type: ignore[misc]
        if argument is None and kind == "consume":
            argument = (self._consuming,)  # (`_CONSUMING`: one token, kept apart)
        self._mask_here = False
        core = self._core
        if core.poisoned:
            self._unsettled = None
            return  # the matcher moves (replaying its tokens) or stays failed
        count = core.matcher_token_count(self._handle)
        tokens = self._tokens
        n = len(tokens)
        pending = self._pending >= 0  # (then its token is the last of `tokens` already)
        if kind == "consume" and argument and count == n + len(argument):
            tokens.extend(argument)
            self._pending = -1
        elif kind == "rollback" and argument and count == n - argument:
            del tokens[-argument:]
            self._pending = -1
        elif kind == "reset" and count == 0:
            tokens.clear()
            self._pending = -1
        elif count == n:
            self._pending = -1  # the pending token, if any, was applied
        elif not (pending and count == n - 1):  # (else: it was not, and still is pending)
            self._failure = lambda: TokensieveError(
                "a call on this matcher was interrupted midway (by an exception a signal handler "
                "raised, such as KeyboardInterrupt): reset() it or make a new one"
            )
        self._unsettled = None

    def _failed(self, core: Core, err: TokensieveError) -> bool:
        """After `err` from a call on `core`: False when another thread's call had retired the
        instance first (retry elsewhere); True otherwise, and when this call retired it, the
        matcher stays failed and says so on later calls."""
        if getattr(err, "instance_retired", False):
            return False
        if core.poisoned:
            message, limit = str(err), getattr(err, "limit", None)
            hint = "; reset() it or create a new one"
            self._failure = (
                (lambda: LimitError(f"this matcher failed earlier: {message}{hint}", limit=limit))
                if isinstance(err, LimitError)
                else (lambda: CoreTrap(f"this matcher failed earlier: {message}{hint}"))
            )
        return True

    # -- masks -----------------------------------------------------------------------------

    def compute_bitmask(self) -> Any:
        """The allowed tokens as a bitmask.

        Returns:
            A numpy int32 array of ceil(vocab_size / 32) words: token t is allowed when bit
            t % 32 (least significant first) of word t // 32 is set. Without numpy (Pyodide),
            an `array.array("i")` with the same layout.

        Raises:
            LimitError: the grammar needed more work than its limits allow (`.limit` says which).
        """
        out = _new_row(self.mask_words)
        dest = memoryview(out).cast("B")
        self._fill(dest)
        return out

    def fill_bitmask(self, bitmask: Any, row: int = 0) -> None:
        """Write the allowed-token mask into row `row` of a caller's int32 array.

        The layout is the one serving engines use (see `compute_bitmask`), copied straight from
        the core's linear memory into the array.

        Args:
            bitmask: a numpy array or CPU torch tensor of int32, shape (batch, words) or
                (words,), with words = ceil(vocab_size / 32); rows must be contiguous.
            row: the row to fill (0 <= row < batch).

        The matcher remembers the last array it filled (repeated fills of the same row skip
        re-validating it), which keeps that array alive and its size fixed while the matcher
        is alive; the process remembers the last array any matcher checked (so a new matcher
        filling a server's batch array skips the checks too), which keeps one array alive.

        Raises:
            ValueError: wrong dtype, shape, device or row.
        """
        self._fill(self._dest(bitmask, row))

    def _fill(self, dest: memoryview) -> None:
        """`fill_bitmask` into a byte view already checked: the step path. No closure, no new
        object. The lock with `with`: after acquire() returns, an exception a signal handler
        raises (Ctrl-C) can come before a `try`, which left the lock held. A poisoned instance
        raises (`instance_retired`) without entering the module, and `_run` moves the matcher."""
        with self._lock:
            if self._unsettled is not None:
                self._settle()
            if self._failure is None:
                core = self._core
                try:
                    if self._pending < 0:
                        core.matcher_fill_bitmask(self._handle, self.mask_words, dest)
                    else:
                        # The consume this step deferred, in the same call.
                        self._unsettled = _APPLYING
                        if not core.matcher_consume_and_fill(self._handle, self._pending, self.mask_words, dest):
                            raise self._pending_refused(core)
                        self._pending = -1
                        self._unsettled = None
                    self._mask_here = True
                    return
                except (CoreTrap, LimitError) as err:
                    self._mask_here = False
                    if self._pending >= 0:
                        self._drop_pending(core)
                    if self._failed(core, err):
                        raise
            self._run(lambda core, handle: core.matcher_fill_bitmask(handle, self.mask_words, dest))
            self._mask_here = True

    def _dest(self, bitmask: Any, row: int) -> memoryview:
        """The byte view of row `row` of `bitmask`, the array checked (`row_view`) once: the
        matcher remembers the last (array, row) pair, so a decoding loop that fills the same
        row of the same array pays for nothing, and the last array's whole byte view, so
        another row of it costs a bounds check and a slice (a server's batch array whose rows
        move between requests) instead of the checks' 4-5 µs."""
        last = self._last_dest
        if last is not None and last[0] is bitmask and last[1] == row:
            return last[2]
        words = self.mask_words
        rows = self._last_rows
        if rows is None or rows[0] is not bitmask:
            # Another matcher checked this array last (a server's batch array, a new request's
            # matcher): its checks hold for this one too.
            rows = _last_checked
            if rows is not None and (rows[0] is not bitmask or rows[1].nbytes != rows[2] * 4 * words):
                rows = None
        if rows is not None and type(row) is int and 0 <= row < rows[2]:
            view = rows[1][row * 4 * words : (row + 1) * 4 * words]
            self._last_rows = rows
        else:
            view = row_view(bitmask, row, words)  # every check, and the errors
            self._last_rows = _checked(bitmask, words)
        self._last_dest = (bitmask, row, view)
        return view

    def consume_and_fill_bitmask(self, token: int, bitmask: Any, row: int = 0) -> bool:
        """Consume `token` and write the next mask, in one call into the core.

        Returns:
            True when the token was accepted (and the mask written); False when the grammar
            refuses it (nothing changes).
        """
        if type(token) is not int or not 0 <= token < self.vocab_size:
            token = self._token(token)
        dest = self._dest(bitmask, row)
        with self._lock:
            if self._unsettled is not None:
                self._settle()
            if self._failure is None and self._pending < 0:  # the step path, as in `fill_bitmask`
                core = self._core
                try:
                    self._mask_here = False
                    self._consuming = token  # (a reference, not a new object: the step path makes none)
                    self._unsettled = _CONSUMING
                    accepted = core.matcher_consume_and_fill(self._handle, token, self.mask_words, dest)
                    if accepted:
                        self._tokens.append(token)
                        self._mask_here = True
                    self._unsettled = None
                    return accepted
                except (CoreTrap, LimitError) as err:
                    self._mask_here = False
                    if self._failed(core, err):
                        raise

        def call(core: Core, handle: int) -> bool:
            self._consuming = token  # (a reference, not a new object: the step path makes none)
            self._unsettled = _CONSUMING
            accepted = core.matcher_consume_and_fill(handle, token, self.mask_words, dest)
            if accepted:
                self._tokens.append(token)
            self._unsettled = None
            return accepted

        with self._lock:
            accepted = self._run(call)
            self._mask_here = accepted
            return accepted

    # -- consuming -------------------------------------------------------------------------

    def consume_token(self, token: int) -> bool:
        """Advance by one token.

        A token (other than EOS) that the mask last filled at this position allows is
        accepted without a call into the core: it is applied at the start of the next call on
        this matcher, which for a decoding loop is the next fill (then one call consumes and
        fills, as `consume_and_fill_bitmask` does, and in `fill_bitmasks` on the thread that
        fills the matcher's instance). So a limit this consume runs into (docs/limits.md) is
        raised by that next call, and the token is then not consumed unless the core had
        consumed it before the limit (`consumed_tokens` agrees with the core either way).

        Returns:
            True when the grammar allows it (the state advanced); False when it does not (the
            state is unchanged).

        Raises:
            TokensieveError: `token` is not in 0..vocab_size-1.
            TypeError: `token` is not an int.
        """
        if type(token) is not int or not 0 <= token < self.vocab_size:
            token = self._token(token)
        with self._lock:
            if self._unsettled is not None:
                self._settle()
            if self._failure is None:  # the step path, as in `fill_bitmask`
                core = self._core
                if self._mask_here and token not in self._eos and core.mask_bit(self._handle, token):
                    # In this order: an exception a signal handler raises comes only after the
                    # append returns, when the three agree.
                    self._mask_here = False
                    self._pending = token
                    self._tokens.append(token)
                    return True
                self._mask_here = False
                try:
                    if self._pending >= 0:
                        self._apply_pending(core)
                    self._consuming = token  # (a reference, not a new object: the step path makes none)
                    self._unsettled = _CONSUMING
                    accepted = core.matcher_consume_token(self._handle, token)
                    if accepted:
                        self._tokens.append(token)
                    self._unsettled = None
                    return accepted
                except (CoreTrap, LimitError) as err:
                    if self._failed(core, err):
                        raise

        def call(core: Core, handle: int) -> bool:
            self._consuming = token  # (a reference, not a new object: the step path makes none)
            self._unsettled = _CONSUMING
            accepted = core.matcher_consume_token(handle, token)
            if accepted:
                self._tokens.append(token)
            self._unsettled = None
            return accepted

        return self._run(call)

    def consume_tokens(self, tokens: Sequence[int]) -> bool:
        """Advance by several tokens, all or nothing.

        Returns:
            True when all were consumed; False when one is refused (nothing is consumed).
        """
        ids = self._tokens_checked(tokens)

        def call(core: Core, handle: int) -> bool:
            self._unsettled = ("consume", tuple(ids))
            if core.matcher_consume_tokens(handle, ids) != len(ids):
                self._unsettled = None
                return False
            self._tokens.extend(ids)
            self._unsettled = None
            return True

        return self._run(call)

    def validate_tokens(self, tokens: Sequence[int]) -> int:
        """How many of `tokens`, from the start, the grammar would accept; the state is unchanged."""
        ids = self._tokens_checked(tokens)
        return self._run(lambda core, handle: core.matcher_validate_tokens(handle, ids))

    def rollback(self, count: int) -> None:
        """Undo the last `count` consumed tokens (an EOS counts as one).

        Raises:
            TokensieveError: fewer than `count` tokens were consumed, or `count` is negative.
        """
        count = _index(count, "count")
        if count < 0:
            raise ArgumentError(f"rollback takes a non-negative count, not {count}")
        with self._lock:
            if self._unsettled is not None:
                self._settle()
            if count > len(self._tokens):
                raise ArgumentError(f"cannot roll back {count} tokens: only {len(self._tokens)} consumed")

        def call(core: Core, handle: int) -> None:
            self._unsettled = ("rollback", count)
            core.matcher_rollback(handle, count)
            if count:
                del self._tokens[-count:]
            self._unsettled = None

        self._run(call)

    def reset(self) -> None:
        """Go back to the start of the grammar (a failed matcher becomes usable again)."""
        with self._lock:
            if self._failure is not None or self._core.poisoned or self._unsettled is not None:
                # (Also after a method was left midway: whatever the core holds goes.)
                self._failure = None
                self._unsettled = None
                self._tokens.clear()
                self._pending = -1
                self._mask_here = False
                self._migrate()  # with no tokens: a fresh core matcher on a healthy instance
                return

            def call(core: Core, handle: int) -> None:
                self._unsettled = ("reset", None)
                core.matcher_reset(handle)
                self._tokens.clear()
                self._unsettled = None

            self._run(call)

    def fork(self) -> Matcher:
        """An independent copy of this matcher at the same position, in the same core instance
        (shares the compiled grammar)."""
        with self._lock:
            handle = self._run(lambda core, handle: core.matcher_fork(handle))
            copy = object.__new__(Matcher)
            copy.tokenizer = self.tokenizer
            copy.grammar = self.grammar
            copy.vocab_size = self.vocab_size
            copy.mask_words = self.mask_words
            copy._pool = self._pool
            copy._lock = threading.RLock()
            copy._tokens = list(self._tokens)
            copy._pending = -1
            copy._mask_here = False
            copy._eos = self._eos
            copy._failure = None
            copy._unsettled = None
            copy._consuming = -1
            copy._last_dest = None
            copy._last_rows = None
            copy._finalizer = None
            renew_lock_after_fork(copy, "_lock", _fail_after_fork)
            copy._attach(self._core, handle)
            return copy

    # -- state -----------------------------------------------------------------------------

    @property
    def token_count(self) -> int:
        """Tokens consumed so far (EOS included)."""
        return self._run(lambda core, handle: core.matcher_token_count(handle))

    @property
    def consumed_tokens(self) -> list[int]:
        """The tokens consumed so far, in order (EOS included); a copy."""
        with self._lock:
            if self._unsettled is not None:
                self._settle()
            return list(self._tokens)

    def is_accepting(self) -> bool:
        """True when the output may end here (EOS is allowed)."""
        return self._run(lambda core, handle: core.matcher_is_accepting(handle))

    def is_stopped(self) -> bool:
        """True when nothing but EOS can follow, or EOS was consumed.

        Note for decoding loops: a stopped matcher still needs its EOS. A loop that stops
        filling masks at `is_stopped()` without emitting EOS lets the model write anything next;
        fill the mask once more (only EOS is allowed) or append EOS. XGrammar's
        `is_terminated()` is true only after EOS was consumed.
        """
        return self._run(lambda core, handle: core.matcher_is_stopped(handle))

    def last_fuel(self) -> int:
        """Fuel units the last call on this matcher's grammar spent in its core instance
        (diagnostics: the work measure `Limits.step_fuel_max` bounds, see docs/limits.md)."""
        return self._run(lambda core, handle: core.matcher_last_fuel(handle))

    def extension_allowed(self, prefix: bytes, suffix: bytes) -> bool:
        """After the bytes `prefix`, would the grammar allow a token strictly extending `suffix`?

        The question fast-forward healing asks before turning forced bytes into tokens. Does
        not change the state; False when the grammar refuses `prefix` itself.
        """
        prefix, suffix = _bytes(prefix, "prefix"), _bytes(suffix, "suffix")
        return self._run(lambda core, handle: core.matcher_extension_allowed(handle, prefix, suffix))

    def heal_position(self, data: bytes, start: int = 0) -> int:
        """The earliest offset `i >= start` from which a token the grammar allows (after
        `data[:i]`) strictly extends `data[i:]`; `len(data)` when there is none.

        Fast-forward healing's question in one call into the core. Does not change the state.
        """
        data = _bytes(data, "data")
        if not 0 <= start <= len(data):
            raise ArgumentError(f"start {start} is outside 0..{len(data)}")
        return self._run(lambda core, handle: core.matcher_heal_position(handle, data, start))

    def validate_text(self, data: bytes) -> tuple[int, bytes]:
        """How far the grammar follows `data` from here, and what it forces after that.

        Prompt lookup's question for a text draft, in one call into the core. The bytes are read
        as if they went into one token (token budgets are not charged). Does not change the state.

        Returns:
            (valid, forced): `data[:valid]` is the longest prefix the grammar allows; `forced`
            are the bytes it forces after that prefix (at most 4096).
        """
        data = _bytes(data, "data")
        return self._run(lambda core, handle: core.matcher_validate_text(handle, data))

    def fill_draft_masks(self, tokens: Sequence[int], bitmask: Any = None) -> tuple[int, Any]:
        """The masks at every position of a draft, from one call into the core.

        Row i is the mask before `tokens[i]`; the row after the last accepted token is the mask
        after the draft. Verification of speculative drafts masks each position with these.
        Does not change the state.

        Args:
            tokens: the draft.
            bitmask: optional int32 array of shape (>= len(tokens) + 1, words) to fill; by
                default a new one (numpy, or a list of `array.array("i")` rows without numpy).

        Returns:
            (valid, masks): `valid` draft tokens are accepted; rows 0..valid are written.
        """
        ids = self._tokens_checked(tokens)
        if len(ids) > DRAFT_TOKENS_MAX:
            raise ArgumentError(f"a draft of {len(ids):,} tokens is longer than {DRAFT_TOKENS_MAX:,}, the most fill_draft_masks takes")
        words = self.mask_words
        if bitmask is None:
            bitmask = _new_masks(len(ids) + 1, words)
        keep: list[Any] = []

        def dest_row(core: Core, row: int) -> Any:
            view = row_view(bitmask[row], 0, words) if isinstance(bitmask, list) else row_view(bitmask, row, words)
            keep.append(view)
            return core.runtime.dest_for(view)

        valid = self._run(
            lambda core, handle: core.matcher_fill_draft_masks(handle, ids, words, lambda row: dest_row(core, row))
        )
        return valid, bitmask

    def compute_ff_bytes(self) -> bytes:
        """The bytes the grammar forces next: no alternative, and it cannot end before them.

        Does not change the state. Empty when there is a choice (or the output may end here).
        At most 1,024 bytes per call: a longer forced run comes in chunks (consume them, then
        ask again), so that each call's work stays bounded.
        """
        return self._run(lambda core, handle: core.matcher_compute_ff_bytes(handle))

    def compute_ff_tokens(self, *, lookback: int = 4, context_tokens: Sequence[int] | None = None) -> list[int]:
        """The tokens the grammar forces next, healed to be canonical (see `_fastforward`).

        Args:
            lookback: how many trailing tokens may be dropped because a longer allowed token
                could start inside them (0: no healing).
            context_tokens: the output's recent tokens; the last one is tokenizer context.
                Default: the tokens this matcher consumed.

        Does not change the state. Forced special tokens are included as their ids.
        """
        from .fastforward import compute_ff_tokens

        lookback = _index(lookback, "lookback")
        if lookback < 0:
            raise ArgumentError(f"lookback must be >= 0, not {lookback}")
        with self._lock:
            if context_tokens is None:
                if self._unsettled is not None:
                    self._settle()
                context_tokens = self._tokens[-lookback - 1 :]
            return compute_ff_tokens(self, lookback=lookback, context_tokens=context_tokens)

    def consume_ff_tokens(self, *, lookback: int = 4, context_tokens: Sequence[int] | None = None) -> list[int]:
        """Consume the tokens `compute_ff_tokens` returns, and return them."""
        with self._lock:
            tokens = self.compute_ff_tokens(lookback=lookback, context_tokens=context_tokens)
            if tokens and not self.consume_tokens(tokens):
                raise TokensieveError(
                    f"internal: the grammar refused its own forced tokens {tokens!r}; please report this with the grammar"
                )
            return tokens

    # -- arguments -------------------------------------------------------------------------

    def _token(self, token: Any) -> int:
        value = token if type(token) is int else _index(token, "token id")
        if not 0 <= value < self.vocab_size:
            raise _bad_token(value, self.vocab_size)
        return value

    def _tokens_checked(self, tokens: Sequence[int]) -> list[int]:
        if isinstance(tokens, (str, bytes)):
            raise ArgumentError(f"token ids must be a sequence of ints, not {type(tokens).__name__}")
        return [self._token(t) for t in tokens]


def batch_take(matcher: Matcher, locked: list[Any]) -> tuple[Any, int, int] | None:
    """Try the matcher's lock for the batch fill (`batch.fill_bitmasks`; never wait for it):
    (its core instance, its handle, its pending token or -1) when the matcher is free, has not
    failed and is settled (`Matcher._settle`), its lock then held and appended to `locked`;
    else None, holding nothing. While the lock is held the matcher cannot move.

    The lock is taken and recorded in one C call (`extend` over `filter`), so an exception a
    signal handler raises (it comes after a call returns) never leaves it held unrecorded."""
    lock = matcher._lock
    count = len(locked)
    locked.extend(filter(try_lock, (lock,)))
    if len(locked) == count:
        return None
    if matcher._failure is not None or matcher._unsettled is not None:
        lock.release()  # (then forgotten: the caller's release of what `locked` holds allows for it)
        locked.pop()
        return None
    return matcher._core, matcher._handle, matcher._pending


def batch_settle(pairs: Sequence[tuple[Matcher, Any]], unconsumed: Container[int], failed: Container[int],
                 filled: bool) -> None:
    """After a batch call on the matchers of `pairs` (their locks held): entry i consumed its
    pending token, if it had one, unless i is in `unconsumed`; it left its mask at this position
    in the core's buffer when `filled` and i is not in `failed`."""
    if not unconsumed and not failed:  # the common case, ~0.1 µs a matcher
        for matcher, _ in pairs:
            matcher._pending = -1
            matcher._mask_here = filled
            matcher._unsettled = None
        return
    for index, (matcher, _) in enumerate(pairs):
        if index not in unconsumed:
            matcher._pending = -1
        matcher._mask_here = filled and index not in failed
        matcher._unsettled = None


def batch_unknown(pairs: Sequence[tuple[Matcher, Any]]) -> None:
    """After a batch call on the matchers of `pairs` ended in an exception (their locks held):
    whether it consumed their pending tokens is unknown, and their masks are not in the core's
    buffers. Those with a pending token stay unsettled (`batch_mark`), for `Matcher._settle`."""
    for matcher, _ in pairs:
        matcher._mask_here = False


def batch_mark(pairs: Sequence[tuple[Matcher, Any]]) -> None:
    """Before a batch call consumes the pending tokens of the matchers of `pairs` (their locks
    held): each is unsettled (`Matcher._settle`) until `batch_settle` records what the call did,
    so an exception a signal handler raises in between leaves them to be settled by the core's
    token counts."""
    for matcher, _ in pairs:
        matcher._unsettled = _APPLYING


# Takes a lock if it is free (`lock.acquire(False)`), for `filter` (`batch_take`, `batch._Plan`).
try_lock: Callable[[Any], bool] = operator.methodcaller("acquire", False)

# `Matcher._unsettled` while a pending token is being applied, and while one token
# (`Matcher._consuming`) is being consumed: made once, so the step path makes no object.
_APPLYING: tuple[str, Any] = ("consume", ())
_CONSUMING: tuple[str, Any] = ("consume", None)

# Whether a method on the matcher was left midway (`Matcher._settle`), read under its lock.
batch_unsettled: Callable[[Matcher], Any] = operator.attrgetter("_unsettled")
# A matcher's pending token or -1 (see `Matcher.consume_token`), read under its lock.
batch_pending: Callable[[Matcher], int] = operator.attrgetter("_pending")


def _bytes(value: Any, what: str) -> bytes:
    """`value` as bytes: bytes, bytearray or memoryview (`bytes(n)` of an int would be n zero
    bytes, and of a str an error about encodings)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    hint = ": encode the text first (text.encode())" if isinstance(value, str) else ""
    raise ArgumentError(f"{what} must be bytes, not {type(value).__name__}{hint}")


def _index(value: Any, what: str) -> int:
    """`value` as an int: ints and numpy integers, not bools, floats or strings."""
    if isinstance(value, bool):
        raise ArgumentError(f"{what} must be an int, not a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise ArgumentError(f"{what} must be an int, not {type(value).__name__}") from None


def mask_token_ids(mask: Sequence[int], limit: int) -> list[int]:
    """The token ids below `limit` whose bit is set in `mask` (int32 words), in order; plain
    Python, for hosts without numpy."""
    ids: list[int] = []
    for index, word in enumerate(mask):
        bits = int(word) & 0xFFFFFFFF
        while bits:
            low = bits & -bits
            token = index * 32 + low.bit_length() - 1
            if token < limit:
                ids.append(token)
            bits ^= low
    return ids


_numpy_module: Any = None


def numpy_or_none() -> Any:
    """The numpy module, or None when it is not installed (Pyodide here), looked up once.

    A failed import is not cached by Python: under Pyodide each attempt searches every path
    entry again, about 300 µs, which used to be most of a mask's cost there.
    """
    global _numpy_module
    if _numpy_module is None:
        try:
            import numpy
        except ImportError:
            _numpy_module = False
        else:
            _numpy_module = numpy
    return _numpy_module or None


def _new_row(words: int) -> Any:
    np = numpy_or_none()
    if np is None:
        import array

        return array.array("i", bytes(words * 4))
    return np.empty(words, dtype=np.int32)


def _new_masks(rows: int, words: int) -> Any:
    """A zeroed (rows, words) int32 array: numpy when importable, else rows of `array.array`."""
    np = numpy_or_none()
    if np is None:
        import array

        return [array.array("i", bytes(words * 4)) for _ in range(rows)]
    return np.zeros((rows, words), dtype=np.int32)


def _bad_token(token: int, vocab_size: int) -> TokensieveError:
    return ArgumentError(f"token id {token} is not in 0..{vocab_size - 1} (the matcher's vocab_size)")


# The last (array, its whole byte view, rows) any matcher checked: one array per process stays
# alive through it until another is filled (as each matcher keeps its last one alive).
_last_checked: tuple[Any, memoryview, int] | None = None


def _checked(bitmask: Any, words: int) -> tuple[Any, memoryview, int] | None:
    """(bitmask, its whole byte view, its rows) for an array `row_view` accepted, also kept as
    `_last_checked`; None when the array is not contiguous as a whole."""
    global _last_checked
    whole = whole_view(bitmask)
    if whole is None:
        return None
    _last_checked = rows = (bitmask, whole, whole.nbytes // (4 * words))
    return rows


def whole_view(bitmask: Any) -> memoryview | None:
    """A writable byte view of all of `bitmask` (which `row_view` accepted), or None when the
    array is not contiguous as a whole (its rows are, one by one)."""
    if type(bitmask).__module__.startswith("torch"):
        bitmask = bitmask.numpy()
    flags = getattr(bitmask, "flags", None)
    if flags is not None and not (flags["C_CONTIGUOUS"] and flags["WRITEABLE"]):
        return None
    view = memoryview(bitmask)
    if view.readonly or not view.c_contiguous:
        return None
    return view.cast("B")


def row_view(bitmask: Any, row: Any, words: int) -> memoryview:
    """A writable byte view of one contiguous int32 row of a numpy array or CPU torch tensor."""
    row = _index(row, "row")
    if row < 0:
        raise ArgumentError(f"row must be >= 0, not {row}")
    module = type(bitmask).__module__
    if module.startswith("torch"):
        if bitmask.device.type != "cpu":
            raise ArgumentError(
                f"fill_bitmask needs a CPU tensor (got device {bitmask.device}); fill a CPU "
                "(ideally pinned) tensor and copy it to the device"
            )
        bitmask = bitmask.numpy()
    shape = getattr(bitmask, "shape", None)
    dtype = getattr(bitmask, "dtype", None)
    if shape is None or dtype is None:
        try:
            view = memoryview(bitmask)
        except TypeError:
            raise ArgumentError(
                f"the bitmask must be an int32 numpy array, CPU torch tensor or buffer, not {type(bitmask).__name__}"
            ) from None
        if view.format not in ("i", "l") or view.itemsize != 4:
            raise ArgumentError("fill_bitmask needs an int32 buffer")
        target = view.cast("B")
        if target.nbytes % (words * 4):
            raise ArgumentError(f"the bitmask buffer's size is not a multiple of {words} int32 words")
        if (row + 1) * words * 4 > target.nbytes:
            raise ArgumentError(f"row {row} is outside the bitmask's {target.nbytes // (words * 4)} rows")
        return target[row * words * 4 : (row + 1) * words * 4]
    if str(dtype) != "int32":
        raise ArgumentError(f"fill_bitmask needs an int32 array, got {dtype}")
    if len(shape) not in (1, 2):
        raise ArgumentError(f"fill_bitmask needs a 1-D or 2-D array, got shape {tuple(shape)}")
    if shape[-1] != words:
        raise ArgumentError(f"the bitmask has {shape[-1]} words per row; this vocabulary needs {words}")
    if len(shape) == 2 and row >= shape[0]:
        raise ArgumentError(f"row {row} is outside the bitmask's {shape[0]} rows")
    if len(shape) == 1 and row != 0:
        raise ArgumentError(f"a 1-D bitmask has only row 0, not {row}")
    target_row = bitmask[row] if len(shape) == 2 else bitmask
    if not target_row.flags["C_CONTIGUOUS"] or not target_row.flags["WRITEABLE"]:
        raise ArgumentError("the bitmask row must be contiguous and writable")
    return memoryview(target_row).cast("B")


def _restored_matcher(tokenizer: Tokenizer, grammar: Grammar, tokens: list[int]) -> Matcher:
    """A pickled `Matcher` (`Matcher.__reduce__`): a new one, at the same position."""
    matcher = Matcher(tokenizer, grammar)
    if tokens and not matcher.consume_tokens(tokens):
        raise ArgumentError("a pickled Matcher's tokens do not follow its grammar")
    return matcher
