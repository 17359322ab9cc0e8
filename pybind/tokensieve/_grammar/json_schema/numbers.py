"""Numbers as regexes over their JSON spelling: integer and decimal ranges (`minimum`,
`maximum`, exclusive bounds), `multipleOf` as the core's residue term over the digits (an
integer multiple) or a divisibility automaton over them (others), and the spellings of one
number (`const`, `enum`)."""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Sequence

from ..automata import _dfa_regex, _group, _minimize

if TYPE_CHECKING:
    from decimal import Decimal


def _is_number(value: Any) -> bool:
    """A JSON number: an int (not a bool; any size) or a finite float."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _is_integral(value: Any) -> bool:
    """Whether a JSON number (`_is_number`) has an integer value (an int of any size, 2.0);
    `float(value)` overflows on ints past 1e308."""
    return isinstance(value, int) or value.is_integer()


# =============================================================================================
# Regex building blocks
# =============================================================================================


def _decimal(value: Any) -> Decimal:
    """A JSON number as the decimal it is written as (a float by its shortest repr: 0.1 is
    1/10)."""
    from decimal import Decimal

    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def _alt(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _digit_class(lo: int, hi: int, base: int) -> str:
    """Digits lo..hi of `base` (10 or 16; hex letters in both cases)."""
    if base == 10:
        if lo == hi:
            return str(lo)
        return "[0-9]" if (lo, hi) == (0, 9) else f"[{lo}-{hi}]"
    if lo == hi:
        return str(lo) if lo <= 9 else f"[{chr(87 + lo)}{chr(55 + lo)}]"
    parts = []
    if lo <= 9:
        top = min(hi, 9)
        parts.append(str(lo) if lo == top else f"{lo}-{top}")
    if hi >= 10:
        a, b = max(lo, 10) - 10, hi - 10
        for first in ("a", "A"):
            x, y = chr(ord(first) + a), chr(ord(first) + b)
            parts.append(x if x == y else f"{x}-{y}")
    return "[" + "".join(parts) + "]"


def _repeat(atom: str, count: int) -> str:
    if count == 0:
        return ""
    return atom if count == 1 else f"{atom}{{{count}}}"


# Digit strings wider than this are ranged block by block (`_blocked_range`): digit by digit,
# the regex nests a group per digit, and the core refuses patterns nested over 100 deep
# (`regex_syntax.nesting_depth_max`), while generated schemas bound numbers by double's
# largest value, 1.7976931348623157e308: 309 digits.
_DIGITWISE_WIDTH_MAX = 64


def _fixed_width_range(lo: Sequence[int], hi: Sequence[int], base: int) -> str:
    """A regex for the digit strings of one width whose value lies in [lo, hi] (digit lists)."""
    if len(lo) > _DIGITWISE_WIDTH_MAX:
        return _blocked_range(lo, hi, base, math.isqrt(len(lo)) + 1)
    if not lo:
        return ""
    rest = len(lo) - 1
    top = base - 1
    if all(d == 0 for d in lo[1:]) and all(d == top for d in hi[1:]):
        return _digit_class(lo[0], hi[0], base) + _repeat(_digit_class(0, top, base), rest)
    if lo[0] == hi[0]:
        return _digit_class(lo[0], lo[0], base) + _fixed_width_range(lo[1:], hi[1:], base)
    alts = [_digit_class(lo[0], lo[0], base) + _fixed_width_range(lo[1:], [top] * rest, base)]
    if lo[0] + 1 <= hi[0] - 1:
        alts.append(_digit_class(lo[0] + 1, hi[0] - 1, base) + _repeat(_digit_class(0, top, base), rest))
    alts.append(_digit_class(hi[0], hi[0], base) + _fixed_width_range([0] * rest, hi[1:], base))
    return _alt(alts)


def _blocked_range(lo: Sequence[int], hi: Sequence[int], base: int, block: int) -> str:
    """`_fixed_width_range` split at the first `block` digits instead of the first digit: the
    regex nests a group per block, plus the digit-by-digit range of the last block, so a width
    of n digits nests about 2·sqrt(n) deep (309 digits: 35) instead of n."""
    if len(lo) <= block:
        return _fixed_width_range(lo, hi, base)
    top = base - 1
    rest = len(lo) - block
    lo_head, hi_head = list(lo[:block]), list(hi[:block])
    any_tail = _repeat(_digit_class(0, top, base), rest)
    if all(d == 0 for d in lo[block:]) and all(d == top for d in hi[block:]):
        return _fixed_width_range(lo_head, hi_head, base) + any_tail
    if lo_head == hi_head:
        return _spelled(lo_head, base) + _blocked_range(lo[block:], hi[block:], base, block)
    alts = [_spelled(lo_head, base) + _blocked_range(lo[block:], [top] * rest, base, block)]
    above, below = _value(lo_head, base) + 1, _value(hi_head, base) - 1
    if above <= below:
        alts.append(_fixed_width_range(_digits(above, block, base), _digits(below, block, base), base) + any_tail)
    alts.append(_spelled(hi_head, base) + _blocked_range([0] * rest, hi[block:], base, block))
    return _alt(alts)


def _spelled(digits: Sequence[int], base: int) -> str:
    return "".join(_digit_class(d, d, base) for d in digits)


def _value(digits: Sequence[int], base: int) -> int:
    value = 0
    for d in digits:
        value = value * base + d
    return value


def _digits(value: int, width: int, base: int) -> list[int]:
    out = []
    for _ in range(width):
        value, digit = divmod(value, base)
        out.append(digit)
    return out[::-1]


@functools.lru_cache(maxsize=4096)
def _hex_range(lo: int, hi: int, width: int) -> str:
    """A regex for `width` hex digits (either case) denoting a value in [lo, hi]."""
    return _fixed_width_range(_digits(lo, width, 16), _digits(hi, width, 16), 16)


def _nonneg_range(lo: int, hi: int | None) -> str | None:
    """A regex for the decimal numerals without leading zeros of the integers in [lo, hi]."""
    if hi is not None and lo > hi:
        return None
    width_lo = len(str(lo))
    alts = []
    if hi is None:
        alts.append(_fixed_width_range(_digits(lo, width_lo, 10), [9] * width_lo, 10))
        alts.append(f"[1-9][0-9]{{{width_lo},}}")
    else:
        width_hi = len(str(hi))
        for width in range(width_lo, width_hi + 1):
            a = lo if width == width_lo else 10 ** (width - 1)
            b = hi if width == width_hi else 10**width - 1
            alts.append(_fixed_width_range(_digits(a, width, 10), _digits(b, width, 10), 10))
    return _alt(alts)


@functools.lru_cache(maxsize=1024)
def int_range_regex(lo: int | None, hi: int | None) -> str | None:
    """A regex matching exactly the JSON integers (no leading zeros, no `-0`) in [lo, hi].

    Args:
        lo: the least value, or None for no lower bound.
        hi: the greatest value, or None for no upper bound.

    Returns:
        The pattern, or None when the interval is empty.
    """
    if lo is not None and hi is not None and lo > hi:
        return None
    alts = []
    if hi is None or hi >= 0:
        nonneg = _nonneg_range(max(lo, 0) if lo is not None else 0, hi)
        if nonneg is not None:
            alts.append(nonneg)
    if lo is None or lo < 0:
        neg = _nonneg_range(max(1, -hi) if hi is not None else 1, -lo if lo is not None else None)
        if neg is not None:
            alts.append("-" + neg)
    return _alt(alts) if alts else None


_FRACTION_ANY = r"(?:\.[0-9]+)?"
_FRACTION_ZERO = r"(?:\.0+)?"
_FRACTION_NONZERO = r"\.[0-9]*[1-9][0-9]*"


def _magnitude_pieces(a: int, a_open: bool, b: int | None, b_open: bool) -> list[str]:
    """Regexes (no sign, no exponent) for the decimals m with a <(=) m <(=) b; a >= 0."""
    pieces = []
    core = _nonneg_range(a + 1 if a_open else a, None if b is None else b - 1)
    if core is not None:
        pieces.append(core + _FRACTION_ANY)
    if a_open and (b is None or a < b):
        pieces.append(str(a) + _FRACTION_NONZERO)
    if b is not None and not b_open and (b > a or (b == a and not a_open)):
        pieces.append(str(b) + _FRACTION_ZERO)
    return pieces


@functools.lru_cache(maxsize=1024)
def number_range_regex(lo: int | None, lo_open: bool, hi: int | None, hi_open: bool) -> str | None:
    """A regex for the JSON numbers x, written without exponent, with lo <(=) x <(=) hi.

    Bounds are integers (None = unbounded); `*_open` makes a bound exclusive. Exact: `1.5` is
    in (1, 2), `2.0` is in [.., 2] but not in [.., 2). Returns None for an empty interval.
    """
    alts = []
    # x >= 0: the magnitude is x.
    if hi is None or hi >= 0:
        a, a_open = (0, False) if lo is None or lo < 0 else (lo, lo_open)
        alts += _magnitude_pieces(a, a_open, hi, hi_open)
    # x < 0: the magnitude is -x > 0.
    if lo is None or lo < 0:
        a, a_open = (0, True) if hi is None or hi >= 0 else (-hi, hi_open)
        b = None if lo is None else -lo
        neg = _magnitude_pieces(a, a_open, b, lo_open)
        if neg:
            alts.append("-" + _alt(neg))
    return _alt(alts) if alts else None


DECIMAL_BOUND_DIGITS_MAX = 40  # fraction digits of a non-integer bound made exact (else rounded outward)


def _fraction_digits(value: Any) -> tuple[int, list[int]] | None:
    """(integer part, fraction digits without trailing zeros) of a non-negative number, as
    written in decimal (floats by their shortest repr); None past `DECIMAL_BOUND_DIGITS_MAX`."""
    dec = _decimal(value)
    whole, _, fraction = format(dec, "f").partition(".")
    fraction = fraction.rstrip("0")
    if len(fraction) > DECIMAL_BOUND_DIGITS_MAX:
        return None
    return int(whole), [int(c) for c in fraction]


def _fraction_range(lo: list[int] | None, lo_open: bool, hi: list[int] | None, hi_open: bool) -> tuple[bool, str | None]:
    """The fractions t (digit strings after the point) with 0.lo <(=) 0.t <(=) 0.hi, bounds as
    trimmed digit lists (None: no bound on that side; 0.hi is then 1, exclusive).

    Returns (whether no fraction at all, i.e. t = 0, qualifies; a regex for the non-empty t
    that do, or None). Digit by digit, a side stays *tight* while t has followed its digits.
    """

    def suffix(i: int, lo_t: bool, hi_t: bool) -> tuple[bool, str | None]:
        lo_past = lo_t and i >= len(lo)  # type: ignore[arg-type]  # t equals 0.lo so far, lo has ended
        hi_past = hi_t and i >= len(hi)  # type: ignore[arg-type]
        if lo_past and hi_past:  # 0.lo = 0.hi = t so far: only zeros, if both are closed
            return (True, "0+") if not lo_open and not hi_open else (False, None)
        if hi_past:  # zeros only (none if hi is open), and then lo must have ended too
            return (False, None) if lo_t or hi_open else (True, "0+")
        if lo_past and not hi_t:
            return (False, "[0-9]*[1-9][0-9]*") if lo_open else (True, "[0-9]+")
        if not lo_t and not hi_t:
            return True, "[0-9]+"
        # Ending here: t = its digits so far, then zeros.
        empty_ok = not lo_t or (lo_past and not lo_open)
        da = lo[i] if lo_t and not lo_past else 0  # type: ignore[index]
        db = hi[i] if hi_t else 9  # type: ignore[index]
        groups: dict[tuple[bool, bool], list[int]] = {}
        for c in range(da, db + 1):
            groups.setdefault((lo_t and c == da, hi_t and c == db), []).append(c)
        alts = []
        for (nl, nh), digits in groups.items():
            ok, rest = suffix(i + 1, nl, nh)
            if rest is None and not ok:
                continue
            tail = "" if rest is None else f"(?:{rest})?" if ok else rest
            alts.append(_digit_set(digits) + tail)
        return empty_ok, _alt(alts) if alts else None

    return suffix(0, lo is not None, hi is not None)


def _digit_set(digits: list[int]) -> str:
    """A class of the given ascending decimal digits."""
    if len(digits) == 1:
        return str(digits[0])
    if digits == list(range(digits[0], digits[-1] + 1)):
        return _digit_class(digits[0], digits[-1], 10)
    return "[" + "".join(map(str, digits)) + "]"


def _with_fraction(whole: int, fraction: tuple[bool, str | None]) -> str | None:
    empty_ok, rest = fraction
    if rest is None:
        return str(whole) if empty_ok else None
    return f"{whole}(?:\\.{rest})?" if empty_ok else f"{whole}\\.{rest}"


def _decimal_magnitudes(a: Any, a_open: bool, b: Any, b_open: bool) -> list[str] | None:
    """Regexes (no sign, no exponent) for the decimals m with a <(=) m <(=) b, a >= 0 and b
    None or >= 0; None when a bound has too many fraction digits."""
    fa, fb = _fraction_digits(a), None if b is None else _fraction_digits(b)
    if fa is None or (b is not None and fb is None):
        return None
    (wa, da) = fa
    pieces: list[str | None] = []
    if fb is not None and fb[0] == wa:
        pieces.append(_with_fraction(wa, _fraction_range(da, a_open, fb[1], b_open)))
        return [p for p in pieces if p]
    pieces.append(_with_fraction(wa, _fraction_range(da, a_open, None, True)))
    middle = _nonneg_range(wa + 1, None if fb is None else fb[0] - 1)
    if middle is not None:
        pieces.append(middle + _FRACTION_ANY)
    if fb is not None:
        pieces.append(_with_fraction(fb[0], _fraction_range(None, False, fb[1], b_open)))
    return [p for p in pieces if p]


def decimal_range_regex(lo: Any, lo_open: bool, hi: Any, hi_open: bool) -> str | None | bool:
    """`number_range_regex` for any finite bounds (non-integer ones exact, digit by digit).

    Returns the regex, None for an empty interval, or False when a bound has more than
    `DECIMAL_BOUND_DIGITS_MAX` fraction digits (the caller rounds it).
    """
    if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_open or hi_open))):
        return None
    alts: list[str] = []
    if hi is None or hi >= 0:
        a, a_open = (0, False) if lo is None or lo < 0 else (lo, lo_open)
        if hi is None or a < hi or (a == hi and not a_open and not hi_open):
            pos = _decimal_magnitudes(a, a_open, hi, hi_open)
            if pos is None:
                return False
            alts += pos
    if lo is None or lo < 0:
        a, a_open = (0, True) if hi is None or hi >= 0 else (-hi, hi_open)
        b = None if lo is None else -lo
        if b is None or a < b or (a == b and not a_open and not lo_open):
            neg = _decimal_magnitudes(a, a_open, b, lo_open)
            if neg is None:
                return False
            if neg:
                alts.append("-" + _alt(neg))
    return _alt(alts) if alts else None


MULTIPLE_REGEX_SIZE_MAX = 50_000  # characters of one multipleOf regex
MULTIPLE_STATE_COUNT_MAX = 24  # states of the minimized divisibility automaton
# Largest integer multipleOf written with the core's residue term (`(?%C,R,S)`, at most 10^6
# there). The term costs the same per byte whatever C is, but its derivatives are lexer states:
# a mask inside a number derives every digit token (Llama-3: 1,110 of up to 3 digits), a new
# state per residue not met before, so with C in the millions every such mask builds about a
# thousand states and a long output of numbers would reach the lexer's state limit
# (`dfa_state_count_max`, 100,000). Up to 10^4 residues a lexeme's states stay below a tenth
# of it; MaskBench's largest integer multiple is 429 (561 merged).
RESIDUE_MODULUS_MAX = 10_000


@functools.lru_cache(maxsize=256)
def multiple_of_regex(multiple: int | float) -> str | None:
    """A regex (the core's syntax) for the exponent-free JSON numbers that are integer
    multiples of `multiple`; `-0` is left to the number lexeme it is intersected with.

    An integer multiple c from 2 to `RESIDUE_MODULUS_MAX` is the core's residue term
    (`_residue_regex`): exact for every c, with constant work per byte. Otherwise, with
    multiple = c·10^-j (c an integer), x is a multiple when x·10^j is an integer (at most j
    significant fraction digits) divisible by c: a DFA reads the digits keeping the remainder
    mod c (fraction digits past the j-th must be zeros), and state elimination turns it into a
    regex. Returns None for a non-positive multiple, or when that automaton has more than
    `MULTIPLE_STATE_COUNT_MAX` states or the regex would be larger than
    `MULTIPLE_REGEX_SIZE_MAX` characters (c with many remainders: state elimination grows
    exponentially with them).
    """
    parts = _multiple_parts(multiple)
    if parts is None:
        return None
    c, j = parts
    if j == 0 and 2 <= c <= RESIDUE_MODULUS_MAX:
        return _residue_regex(c)
    if c > 1000 or j > 12:
        return None
    return _divisibility_regex(c, j)


@functools.lru_cache(maxsize=256)
def not_multiple_of_regex(multiple: int | float) -> str | None:
    """A regex (the core's syntax) for the exponent-free JSON numbers that are *not* multiples
    of the integer `multiple` (2 to `RESIDUE_MODULUS_MAX`; else None): an integer part whose
    residue is not 0 (`(?%!c,0,d)`) with a zero fraction, or any non-zero fraction. A plain
    term to intersect with, where the complement of `multiple_of_regex` beside a `multipleOf`
    left the core to search the product of their residues for a word (`docs/lexer.md`)."""
    parts = _multiple_parts(multiple)
    if parts is None or parts[1] != 0 or not 2 <= parts[0] <= RESIDUE_MODULUS_MAX:
        return None
    integral = _residue_alternatives(parts[0], negated=True)
    return f"-?(?:{integral}){_FRACTION_ZERO}|-?(?:0|[1-9][0-9]*){_FRACTION_NONZERO}"


def _residue_alternatives(c: int, negated: bool = False) -> str:
    """`0` (unless negated: 0 is a multiple) or a digit d from 1 to 9 followed by the digit
    run taking the residue d mod c to 0 (to anything else, negated), digits of the same
    residue in one class."""
    by_residue: dict[int, list[int]] = {}
    for d in range(1, 10):
        by_residue.setdefault(d % c, []).append(d)
    alts = [] if negated else ["0"]
    mark = "!" if negated else ""
    for residue, digits in sorted(by_residue.items()):
        term = f"(?%{mark}{c},0)" if residue == 0 else f"(?%{mark}{c},0,{residue})"
        alts.append(_digit_set(digits) + term)
    return "|".join(alts)


def _residue_regex(c: int) -> str:
    """The exponent-free JSON numbers that are multiples of the integer c (2 ≤ c ≤
    `RESIDUE_MODULUS_MAX`): `-?`, then `0` or a digit d from 1 to 9 followed by the digit run
    whose value keeps the residue d mod c going to 0 (`(?%c,0,d mod c)`: the core reads it as
    a residue automaton, docs/grammar_ir.md), then a zero fraction (`30.000`). Digits that
    start the same residue share a class (`[147](?%3,0,1)`)."""
    return "-?(?:" + _residue_alternatives(c) + ")" + _FRACTION_ZERO


@functools.lru_cache(maxsize=256)
def multiple_of_regexes(multiple: int | float) -> tuple[str, ...] | None:
    """Regexes whose intersection is `multiple_of_regex(multiple)`'s language: that one when it
    can be had (always for an integer up to `RESIDUE_MODULUS_MAX`); else, for a non-integer,
    its last digits' automaton and the residue run of its factor coprime to 10
    (`_point_residue_regexes`); else one per prime power of c (x·10^j is divisible by c when it
    is by each of them), each small where c's automaton is not. None when a part cannot be had
    either.
    """
    single = multiple_of_regex(multiple)
    if single is not None:
        return (single,)
    parts = _multiple_parts(multiple)
    if parts is None or parts[0] > 10**9 or parts[1] > 12:
        return None
    c, j = parts
    split = _point_residue_regexes(c, j)
    if split is not None:
        return split
    factors = _prime_powers(c)
    if len(factors) < 2 or max(factors) > 1000:
        return None
    regexes = []
    for factor in sorted(factors, reverse=True):  # the likeliest to fail first
        regex = _factor_regex(factor, j)
        if regex is None:
            return None
        regexes.append(regex)
    return tuple(regexes)


def _point_residue_regexes(c: int, j: int) -> tuple[str, ...] | None:
    """For a non-integer multiple c·10^-j (j ≥ 1), c = c'·f with c' coprime to 10 and f a
    product of 2s and 5s: the automaton of f·10^-j (the last digits: divisibility by f, and
    zeros past the j-th fraction digit; small, since f has no remainders that carry) and the
    digits of the number, its point left out, modulo c' (`(?%.c',0)`). x·10^j is x's digits
    read as an integer times a power of ten (negative past j fraction digits, where the
    automaton wants zeros), which is invertible modulo c', so x·10^j ≡ 0
    (mod c') exactly when those digits are (9.5 = 95·10^-1: the last digit is 0 or 5 and the
    digits are a multiple of 19). None when c' is 1 (the automaton alone; it was tried) or
    above `RESIDUE_MODULUS_MAX`, or when f's automaton is over the bounds."""
    coprime = c
    for prime in (2, 5):
        while coprime % prime == 0:
            coprime //= prime
    if j == 0 or coprime == 1 or coprime > RESIDUE_MODULUS_MAX:
        return None
    last_digits = _factor_regex(c // coprime, j)
    if last_digits is None:
        return None
    return (last_digits, f"-?(?%.{coprime},0)")


def _multiple_parts(multiple: int | float) -> tuple[int, int] | None:
    """(c, j) with multiple = c·10^-j, c an integer; None for a non-positive multiple."""
    if not _is_number(multiple) or multiple <= 0:
        return None
    dec = _decimal(multiple)
    sign, digits, exponent = dec.normalize().as_tuple()
    c = int("".join(map(str, digits))) * (10 ** exponent if isinstance(exponent, int) and exponent > 0 else 1)
    j = max(0, -exponent) if isinstance(exponent, int) else 0
    return c, j


@functools.lru_cache(maxsize=256)
def _factor_regex(c: int, j: int) -> str | None:
    """`_divisibility_regex` for a prime power, kept: the same few (3, 4, 8, 11, ...) come back
    in multiple after multiple (MaskBench allany11 merges dozens of multiples)."""
    return _divisibility_regex(c, j)


def _prime_powers(n: int) -> list[int]:
    """The prime powers whose product is n (n ≥ 1), by trial division."""
    out = []
    p = 2
    while p * p <= n:
        if n % p == 0:
            power = 1
            while n % p == 0:
                n //= p
                power *= p
            out.append(power)
        p += 1
    if n > 1:
        out.append(n)
    return out


def _divisibility_regex(c: int, j: int) -> str | None:
    """`multiple_of_regex` for multiple = c·10^-j."""
    coprime = c  # c's factor coprime to 10
    for prime in (2, 5):
        while coprime % prime == 0:
            coprime //= prime
    if coprime > MULTIPLE_STATE_COUNT_MAX:
        # The minimized automaton has a state per remainder mod `coprime` of the integer part
        # (10 is invertible mod it: some digits make one remainder a multiple and not another):
        # too many, known before building and minimizing thousands of states (MaskBench
        # allany11's 561 cost 26 ms).
        return None
    # States: "S" start, "Z" integer part 0, ("i", r) integer part ≡ r, ("d", r) after '.',
    # ("f", r, k) k fraction digits read, ("z", r) past j fraction digits (zeros only).
    edges: dict[tuple[Any, Any], set[str]] = {}

    def edge(a: Any, b: Any, chars: str) -> None:
        edges.setdefault((a, b), set()).update(chars)

    def step(r: int, d: str) -> int:
        return (10 * r + int(d)) % c

    edge("S", "Z", "0")
    for d in "123456789":
        edge("S", ("i", int(d) % c), d)
    for r in range(c):
        for d in "0123456789":
            edge(("i", r), ("i", step(r, d)), d)
        edge(("i", r), ("d", r), ".")
        if j == 0:
            edge(("d", r), ("z", r), "0")
        else:
            for d in "0123456789":
                edge(("d", r), ("f", step(r, d), 1), d)
            for k in range(1, j):
                for d in "0123456789":
                    edge(("f", r, k), ("f", step(r, d), k + 1), d)
            edge(("f", r, j), ("z", r), "0")
        edge(("z", r), ("z", r), "0")
    edge("Z", ("d", 0), ".")
    accepting: set[Any] = {"Z"} | {("i", r) for r in range(c) if r * 10**j % c == 0}
    accepting |= {("f", r, k) for r in range(c) for k in range(1, j + 1) if r * 10 ** (j - k) % c == 0}
    accepting |= {("z", r) for r in range(c) if r == 0}
    edges, start, accepting = _minimize(edges, "S", accepting)
    if len({q for pair in edges for q in pair}) > MULTIPLE_STATE_COUNT_MAX:
        return None
    body = _dfa_regex(edges, start, accepting, MULTIPLE_REGEX_SIZE_MAX)
    return None if body is None else "-?" + _group(body)


BOUNDED_MULTIPLES_MAX = 256  # multiples of a too-large multipleOf listed between two bounds


def _bounded_multiples(multiple: Any, lo: Any, lo_open: bool, hi: Any, hi_open: bool) -> list[Any] | None:
    """The multiples of `multiple` between the bounds (each an int, or a Decimal when not
    integral), for a `multipleOf` no residue term or automaton can express: few of them lie
    between two bounds when the divisor is large. None when a bound is missing, the divisor is
    not positive, or there are more than `BOUNDED_MULTIPLES_MAX`."""
    from decimal import localcontext
    from fractions import Fraction

    if lo is None or hi is None or not _is_number(multiple) or multiple <= 0:
        return None
    step, low, high = (Fraction(_decimal(v)) for v in (multiple, lo, hi))
    first, last = math.ceil(low / step), math.floor(high / step)
    if lo_open and first * step == low:
        first += 1
    if hi_open and last * step == high:
        last -= 1
    if last - first + 1 > BOUNDED_MULTIPLES_MAX:
        return None
    if step.denominator == 1:
        return [int(step) * k for k in range(first, last + 1)]
    written = _decimal(multiple)
    with localcontext() as context:
        context.prec = len(written.as_tuple().digits) + len(str(max(abs(first), abs(last)))) + 2
        return [written * k for k in range(first, last + 1)]


def _number_spelling_regex(value: Any) -> str:
    """A regex for the exponent-free JSON spellings of one number (`2` → `2(?:\\.0+)?`): an
    int, a float (read by its shortest repr) or a Decimal."""
    dec = _decimal(value)
    text = format(abs(dec), "f")
    whole, _, fraction = text.partition(".")
    whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
    sign = "" if dec >= 0 else "-"
    if fraction:
        return f"{sign}{whole}\\.{fraction}0*"
    return f"{sign}{whole}{_FRACTION_ZERO}" if dec != 0 else f"-?0{_FRACTION_ZERO}"


