"""Prompt lookup: draft tokens by finding the end of the context earlier in the context.

In input-grounded generation (extraction, summaries, code edits) the output copies spans of the
prompt. Prompt lookup (Saxena 2023) exploits that without a draft model: take the last few
tokens of the context, find them earlier in the context, and propose the tokens that followed
there; the model checks the whole draft in one forward pass, so every accepted draft token is a
model call saved (see `generate`, which verifies drafts losslessly).

Two ways to find the span, both indexed incrementally (nothing is rescanned per step):

- **Token ids** (the seed's method): the last n ids (n from `max_ngram_size` down to
  `min_ngram_size`) are looked up in a dict of every n-gram of the context; the most recent
  earlier occurrence wins and its following ids are the draft.
- **Text**: token ids miss most of what a source document offers a structured output. The
  output's `John` after `":"` is a different token from the document's ` John` after a space,
  and separators such as `":"` never occur in the document at all. So the text drafter indexes
  the context's *words* (runs of letters, digits, `_` and non-ASCII bytes), finds the output's
  last words in the context, and takes the *text* that follows there, aligned on the output's
  own tail: if the document continues with exactly the output's trailing separator, the text
  after it; otherwise the document's next word (the output wrote its own separator). The text
  is then cut where the grammar refuses it, extended by the bytes the grammar forces
  (`Matcher.validate_text`, one core call per round), looked up again from the new end, and
  finally tokenized canonically after the context's last token — the tokens the model itself
  would write for that text.

With a matcher, drafts are grammar-aware: a token draft is cut at the first token the grammar
refuses (`validate_tokens`); where a draft stops or is cut, the grammar's forced tokens (healed,
canonical) are appended and the lookup continues after them. A draft never holds a token the
grammar refuses, and the matcher is left as it was.

Cost: `extend` is O(n-gram sizes) dict updates per token (per word for text); a lookup is a few
dict probes (about 2 µs at any context length); a grammar-aware draft adds one core call per
round plus one `encode` for text drafts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Final

from .._errors import ArgumentError, TokensieveError
from .matcher import DRAFT_TOKENS_MAX, _index

if TYPE_CHECKING:
    from .matcher import Matcher
    from .._tokenizer.tokenizer import Tokenizer

__all__ = ["PromptLookup"]

_MODES: Final = ("text", "tokens")
# The longest n-gram matched: the index keeps one table per length, so 10**9 ran the process out
# of memory making them (drafting uses 1-5).
NGRAM_SIZE_MAX: Final = 64
# Text drafts take this many bytes of the document per draft token asked for.
_BYTES_PER_TOKEN: Final = 8
# Lookup rounds per draft (each: a lookup, a cut, forced bytes).
_ROUNDS_MAX: Final = 8
# Occurrences of a key tried, most recent first, when the grammar refuses a continuation at once.
_OCCURRENCES_TRIED: Final = 3
# Bytes of the draft's end searched for its last words.
_QUERY_BYTES: Final = 256


def _is_word_byte(b: int) -> bool:
    return b >= 0x80 or 0x30 <= b <= 0x39 or 0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A or b == 0x5F


_WORD_BYTE: Final = bytes(1 if _is_word_byte(b) else 0 for b in range(256))


class _TokenIndex:
    """Every n-gram of the token ids, n in [n_min, n_max], mapped to its end positions."""

    def __init__(self, n_min: int, n_max: int) -> None:
        self.n_min = n_min
        self.n_max = n_max
        self.ids: list[int] = []
        self.ends: dict[int, dict[tuple[int, ...], list[int]]] = {n: {} for n in range(n_min, n_max + 1)}

    def extend(self, ids: Sequence[int]) -> None:
        own = self.ids
        for token in ids:
            own.append(token)
            end = len(own) - 1
            for n in range(self.n_min, min(self.n_max, end + 1) + 1):
                self.ends[n].setdefault(tuple(own[end - n + 1 : end + 1]), []).append(end)

    def rollback(self, count: int) -> None:
        own = self.ids
        for _ in range(count):
            end = len(own) - 1
            for n in range(self.n_min, min(self.n_max, end + 1) + 1):
                key = tuple(own[end - n + 1 : end + 1])
                positions = self.ends[n][key]
                positions.pop()
                if not positions:
                    del self.ends[n][key]
            own.pop()

    def lookup(self, tail: Sequence[int], count: int) -> list[int]:
        """The ids that followed the longest n-gram ending `tail` at its latest earlier place.

        `tail` ends with the context's last ids, possibly followed by draft ids that are not in
        the index; an occurrence ending at the context's last position is the tail itself.
        """
        own = self.ids
        last = len(own) - 1
        for n in range(min(self.n_max, len(tail)), self.n_min - 1, -1):
            positions = self.ends[n].get(tuple(tail[-n:]))
            if not positions:
                continue
            for end in reversed(positions):
                if end < last:
                    return own[end + 1 : end + 1 + count]
        return []


class _TextIndex:
    """The context's bytes and every word n-gram of them, mapped to the words' ends.

    A word is a maximal run of word bytes; it is indexed once the byte after it arrives (until
    then it may still grow).
    """

    def __init__(self, n_min: int, n_max: int) -> None:
        self.n_min = n_min
        self.n_max = n_max
        self.text = bytearray()
        self.token_ends: list[int] = []
        # Complete words as (start, end) byte offsets, and where the current run started.
        self.words: list[tuple[int, int]] = []
        self.run_start: int | None = None
        self.ends: dict[tuple[bytes, ...], list[int]] = {}

    def _word(self, index: int) -> bytes:
        start, end = self.words[index]
        return bytes(self.text[start:end])

    def _keys(self, last: int) -> list[tuple[bytes, ...]]:
        """The n-gram keys ending at word `last`."""
        keys = []
        for n in range(self.n_min, min(self.n_max, last + 1) + 1):
            keys.append(tuple(self._word(i) for i in range(last - n + 1, last + 1)))
        return keys

    def append(self, data: bytes) -> None:
        text = self.text
        base = len(text)
        text += data
        for offset, b in enumerate(data):
            position = base + offset
            if _WORD_BYTE[b]:
                if self.run_start is None:
                    self.run_start = position
            elif self.run_start is not None:
                self.words.append((self.run_start, position))
                self.run_start = None
                last = len(self.words) - 1
                for key in self._keys(last):
                    self.ends.setdefault(key, []).append(last)
        self.token_ends.append(len(text))

    def rollback(self, count: int) -> None:
        if count <= 0:
            return
        del self.token_ends[-count:]
        keep = self.token_ends[-1] if self.token_ends else 0
        # A word is complete only once the byte after it is kept.
        while self.words and self.words[-1][1] >= keep:
            last = len(self.words) - 1
            for key in self._keys(last):
                positions = self.ends[key]
                positions.pop()
                if not positions:
                    del self.ends[key]
            self.words.pop()
        del self.text[keep:]
        self.run_start = None
        if keep and _WORD_BYTE[self.text[keep - 1]]:
            start = keep
            while start > 0 and _WORD_BYTE[self.text[start - 1]]:
                start -= 1
            self.run_start = start

    def continuations(self, draft_text: bytes, count_bytes: int, score: Sequence[int]) -> Iterator[tuple[int, bytes]]:
        """Candidate texts that continue the context followed by `draft_text`, each with its
        alignment (`_aligned`), lazily: most promising first.

        The last complete words are looked up, longest n-gram first; for the latest few
        earlier occurrences of the longest one found, the context's text after them is aligned
        on the tail after the last word (see the module doc), the alignments that `score`
        rates higher first.
        """
        text = self.text
        words, tail, own_end = self._query(draft_text)
        for n in range(min(self.n_max, len(words)), self.n_min - 1, -1):
            positions = self.ends.get(tuple(words[-n:]))
            if not positions:
                continue
            found = False
            tried = 0
            for index in reversed(positions):
                end = self.words[index][1]
                if end == own_end:
                    continue
                candidates = _aligned(bytes(text[end : end + count_bytes + len(tail)]), tail)
                candidates.sort(key=lambda c: -score[c[0]])
                for candidate in candidates:
                    found = True
                    yield candidate
                tried += 1
                if tried >= _OCCURRENCES_TRIED:
                    break
            if found:
                return

    def _query(self, draft_text: bytes) -> tuple[list[bytes], bytes, int]:
        """The last complete words of the context followed by `draft_text`, the bytes after
        them, and the end offset of the last word when it is the context's own (else -1).

        The context's words come from the index; only the draft text is scanned."""
        last_end = self.words[-1][1] if self.words else 0
        if draft_text:
            run = self.run_start
            joined = (bytes(self.text[run:]) if run is not None else b"") + draft_text
            draft_words, joined_end = _split_query(joined[-_QUERY_BYTES:], len(joined) > _QUERY_BYTES)
            if draft_words:
                keep = max(0, self.n_max - len(draft_words))
                words = [self._word(i) for i in range(max(0, len(self.words) - keep), len(self.words))]
                return words + draft_words[-self.n_max :], joined[-_QUERY_BYTES:][joined_end:], -1
        words = [self._word(i) for i in range(max(0, len(self.words) - self.n_max), len(self.words))]
        return words, bytes(self.text[last_end:]) + draft_text, last_end


_WORD_RE: Final = re.compile(rb"[0-9A-Za-z_\x80-\xff]+")
# Alignments: the document continues exactly with the output's tail (`ALIGN_EXACT`), or the
# draft starts at the k-th word after the matched words (alignment 1 + k, k < _SKIP_WORDS_MAX).
ALIGN_EXACT: Final = 0
_SKIP_WORDS_MAX: Final = 3
_ALIGNMENTS: Final = 1 + _SKIP_WORDS_MAX


def _split_query(query: bytes, truncated: bool) -> tuple[list[bytes], int]:
    """The complete words of `query` (a word followed by a byte) and where the last one ends.

    When the query is a window cut from a longer text, a word at its start may be partial and
    is dropped."""
    words: list[bytes] = []
    last_end = 0
    for match in _WORD_RE.finditer(query):
        if match.end() == len(query):
            break
        last_end = match.end()
        if truncated and match.start() == 0:
            continue
        words.append(match.group())
    return words, last_end


def _aligned(follow: bytes, tail: bytes) -> list[tuple[int, bytes]]:
    """Where the output's `tail` (its bytes after its last complete word: a separator, then
    maybe the start of a word) meets `follow` (the document's bytes after the same words).

    Candidates: `ALIGN_EXACT` when the document continues with the tail itself; alignment
    `1 + k` when the k-th word of `follow` starts with the tail's partial word (the document's
    separator, and maybe k words such as "is", differ from the output's).
    """
    out: list[tuple[int, bytes]] = []
    if follow.startswith(tail) and len(follow) > len(tail):
        out.append((ALIGN_EXACT, follow[len(tail) :]))
    partial = len(tail)
    while partial > 0 and _WORD_BYTE[tail[partial - 1]]:
        partial -= 1
    word = tail[partial:]
    for k, match in enumerate(_WORD_RE.finditer(follow)):
        if k >= _SKIP_WORDS_MAX:
            break
        start = match.start()
        if follow.startswith(word, start) and len(follow) > start + len(word):
            out.append((1 + k, follow[start + len(word) :]))
    return out


class PromptLookup:
    """Drafts tokens from the context (prompt and output so far) for speculative decoding.

    Feed it the prompt and then every accepted output token (`extend`); undo with `rollback`;
    ask for a draft with `propose`. See the module doc for the two lookup modes.

    Args:
        tokenizer: the model's tokenizer (text mode decodes and encodes with it).
        max_ngram_size: the longest n-gram (tokens, or words in text mode) matched.
        num_pred_tokens: tokens taken from the context per lookup.
        min_ngram_size: the shortest n-gram matched.
        mode: `"text"` (match words, tokenize the found text canonically) or `"tokens"` (match
            token ids, the seed's method).
        max_draft_tokens: cap on a whole draft, forced tokens included (default
            `3 * num_pred_tokens`).
        lookback: healing look-back of the forced tokens appended to drafts.

    Not safe to share between threads: it is one request's state.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        max_ngram_size: int = 3,
        num_pred_tokens: int = 10,
        min_ngram_size: int = 1,
        *,
        mode: str = "text",
        max_draft_tokens: int | None = None,
        lookback: int = 4,
    ) -> None:
        if not (hasattr(tokenizer, "token_bytes") and hasattr(tokenizer, "vocab_size")):
            raise ArgumentError(
                f"PromptLookup needs a tokensieve.Tokenizer, not {type(tokenizer).__name__} "
                "(Tokenizer.from_hf makes one from a transformers tokenizer)"
            )
        if mode not in _MODES:
            raise ArgumentError(f"PromptLookup mode must be one of {_MODES}, not {mode!r}")
        for name, value in (("max_ngram_size", max_ngram_size), ("num_pred_tokens", num_pred_tokens), ("min_ngram_size", min_ngram_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ArgumentError(f"PromptLookup {name} must be an int >= 1, not {value!r}")
        if min_ngram_size > max_ngram_size:
            raise ArgumentError(f"PromptLookup min_ngram_size ({min_ngram_size}) exceeds max_ngram_size ({max_ngram_size})")
        if max_ngram_size > NGRAM_SIZE_MAX:
            raise ArgumentError(f"PromptLookup max_ngram_size must be at most {NGRAM_SIZE_MAX}, not {max_ngram_size}")
        self.tokenizer = tokenizer
        self.mode = mode
        self.num_pred_tokens = num_pred_tokens
        self.max_draft_tokens = max_draft_tokens if max_draft_tokens is not None else 3 * num_pred_tokens
        if not isinstance(self.max_draft_tokens, int) or not 1 <= self.max_draft_tokens:
            raise ArgumentError(f"PromptLookup max_draft_tokens must be an int >= 1, not {max_draft_tokens!r}")
        if self.max_draft_tokens > DRAFT_TOKENS_MAX or num_pred_tokens > DRAFT_TOKENS_MAX:
            raise ArgumentError(f"PromptLookup drafts at most {DRAFT_TOKENS_MAX:,} tokens (num_pred_tokens, max_draft_tokens)")
        self.lookback = lookback
        self._tokens = _TokenIndex(min_ngram_size, max_ngram_size)
        self._text = _TextIndex(min_ngram_size, max_ngram_size) if mode == "text" else None
        # Which alignment the output followed so far (see `_learn`), and the text draft rounds
        # proposed last: (context bytes when proposed, draft bytes before the round, candidates).
        self._alignment_score = [0] * _ALIGNMENTS
        self._rounds: list[tuple[int, bytes, list[tuple[int, bytes]]]] = []

    def __len__(self) -> int:
        return len(self._tokens.ids)

    @property
    def context(self) -> list[int]:
        """The context's token ids (a copy)."""
        return list(self._tokens.ids)

    def extend(self, token_ids: Sequence[int]) -> None:
        """Append tokens to the context (the prompt, then each accepted output token)."""
        if isinstance(token_ids, (str, bytes)):
            raise ArgumentError(f"PromptLookup.extend takes token ids, not {type(token_ids).__name__}")
        ids = [_index(t, "PromptLookup.extend takes int token ids: a token id") for t in token_ids]
        vocab = self.tokenizer.vocab_size
        for t in ids:
            if not 0 <= t < vocab:
                raise TokensieveError(f"PromptLookup.extend: token id {t} is not in 0..{vocab - 1}")
        self._tokens.extend(ids)
        if self._text is not None:
            for t in ids:
                self._text.append(b"" if self.tokenizer.is_special(t) else self.tokenizer.token_bytes(t))

    def rollback(self, count: int) -> None:
        """Remove the last `count` tokens from the context."""
        if not 0 <= count <= len(self._tokens.ids):
            raise TokensieveError(f"PromptLookup.rollback: cannot remove {count} of {len(self._tokens.ids)} tokens")
        self._tokens.rollback(count)
        if self._text is not None:
            self._text.rollback(count)

    def propose(self, matcher: Matcher | None = None, *, fast_forward: bool = True) -> list[int]:
        """A draft continuing the context; with `matcher` (at the context's end), grammar-aware.

        Args:
            matcher: the output's matcher, positioned at the context's end; None for a draft
                without a grammar (the plain lookup). It is left unchanged.
            fast_forward: append the grammar's forced tokens where the lookup stops and look up
                again after them.

        Returns:
            The draft's token ids, possibly none; with a matcher, every token is allowed.
        """
        if self._text is None:
            if matcher is None:
                return self.lookup()
            return self._token_draft(matcher, fast_forward)
        if matcher is None:
            return self._text_draft_free()
        return self._text_draft(matcher, fast_forward)

    def lookup(self) -> list[int]:
        """The plain token-id lookup (no grammar, no forcing): the seed's draft."""
        return self._tokens.lookup(self._tokens.ids, self.num_pred_tokens)

    def lookup_only(self) -> int:
        """The index lookup of this mode alone, without a grammar or tokenization (for timing):
        how many candidates it found."""
        if self._text is None:
            return len(self.lookup())
        first = next(self._text.continuations(b"", self.num_pred_tokens * _BYTES_PER_TOKEN, self._alignment_score), None)
        return 0 if first is None else 1

    # -- token ids -------------------------------------------------------------------------

    def _token_draft(self, matcher: Matcher, fast_forward: bool) -> list[int]:
        draft: list[int] = []
        context = self._tokens.ids
        consumed = 0
        try:
            for _ in range(_ROUNDS_MAX):
                room = self.max_draft_tokens - len(draft)
                if room <= 0:
                    break
                tail = context[-self._tokens.n_max :] + draft if draft else context
                found = self._tokens.lookup(tail, min(self.num_pred_tokens, room))
                valid = matcher.validate_tokens(found) if found else 0
                if valid:
                    matcher.consume_tokens(found[:valid])
                    consumed += valid
                    draft.extend(found[:valid])
                forced = self._forced(matcher, draft, fast_forward)
                if forced:
                    matcher.consume_tokens(forced)
                    consumed += len(forced)
                    draft.extend(forced)
                    continue
                if not found or valid < len(found):
                    break
        finally:
            if consumed:
                matcher.rollback(consumed)
        return draft

    def _forced(self, matcher: Matcher, draft: list[int], fast_forward: bool) -> list[int]:
        if not fast_forward or matcher.is_stopped():
            return []
        room = self.max_draft_tokens - len(draft)
        if room <= 0:
            return []
        recent = (self._tokens.ids[-self.lookback - 1 :] + draft)[-self.lookback - 1 :]
        return matcher.compute_ff_tokens(lookback=self.lookback, context_tokens=recent)[:room]

    # -- text ------------------------------------------------------------------------------

    def _text_draft_free(self) -> list[int]:
        assert self._text is not None
        self._learn()
        for _, candidate in self._text.continuations(b"", self.num_pred_tokens * _BYTES_PER_TOKEN, self._alignment_score):
            tokens = self._encode_after_context(candidate)[: self.num_pred_tokens]
            if tokens:
                return tokens
        return []

    def _text_draft(self, matcher: Matcher, fast_forward: bool) -> list[int]:
        """Lookup rounds in bytes (cut by the grammar, extended by forced bytes), then one
        canonical tokenization of the whole draft text."""
        assert self._text is not None
        self._learn()
        if matcher.is_stopped():
            return []
        base = len(self._text.text)
        text = b""
        for _ in range(_ROUNDS_MAX):
            if len(text) >= self.max_draft_tokens * _BYTES_PER_TOKEN:
                break
            tried: list[tuple[int, bytes]] = []
            chosen, forced = b"", b""
            for alignment, candidate in self._text.continuations(text, self.num_pred_tokens * _BYTES_PER_TOKEN, self._alignment_score):
                tried.append((alignment, candidate))
                valid, forced = matcher.validate_text(text + candidate)
                chosen = candidate[: max(0, valid - len(text))]
                if chosen:
                    break
            self._rounds.append((base, text, tried))
            if not tried:
                _, forced = matcher.validate_text(text)
            if not fast_forward:
                forced = b""
            if not chosen and not forced:
                break
            text += chosen + forced
        if not text:
            return []
        tokens = self._encode_after_context(text)
        valid = matcher.validate_tokens(tokens)
        return tokens[: min(valid, self.max_draft_tokens)]

    def _learn(self) -> None:
        """Score the alignments of the last draft's rounds against what the output became.

        A round counts once the output has passed its start with the draft text before it
        intact; the alignments whose text agrees longest with the output score a point. So
        a document that says `The name is John` teaches the drafter, after one value, to skip
        the "is" (alignment 2) rather than copy it (alignment 1).
        """
        assert self._text is not None
        text = self._text.text
        for base, before, candidates in self._rounds:
            start = base + len(before)
            if len(text) <= start or text[base:start] != before:
                continue
            actual = bytes(text[start : start + 64])
            agree = [(_common_prefix(candidate, actual), alignment) for alignment, candidate in candidates]
            best = max((n for n, _ in agree), default=0)
            if best:
                for n, alignment in set(agree):
                    if n == best:
                        self._alignment_score[alignment] += 1
        self._rounds.clear()

    def _encode_after_context(self, data: bytes) -> list[int]:
        from .._tokenizer.partial import encode_in_context

        recent = self._tokens.ids[-1:]
        return encode_in_context(self.tokenizer, data, recent)


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
