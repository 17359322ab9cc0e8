"""llguidance's parametric rules: `name::_` rules with one 64-bit parameter, `%if` conditions.

`perm::_ : "a" perm::set_bit(0) %if bit_clear(0) | ""` stands for one rule per parameter
value. llguidance materialises the instances lazily inside its Earley parser; the IR is a
plain CFG, so the front-end materialises the instances reachable from `start` (breadth first)
and refuses a grammar that needs more than `PARAMETRIC_INSTANCE_COUNT_MAX` of them (a
permutation of n items needs 2ⁿ). The functions follow llguidance's `parametric.md`.
"""

from __future__ import annotations

import re

PARAMETRIC_INSTANCE_COUNT_MAX = 4_096
_MASK64 = (1 << 64) - 1
_TOKEN_RE = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|[0-9]+)|([A-Za-z_][A-Za-z0-9_]*)|(.))")


class ParamError(ValueError):
    """A malformed parameter expression or condition; the message says what is wrong."""


def _tokens(text: str) -> list[str]:
    out = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
        tok = m.group(1) or m.group(2) or m.group(3)
        if tok is not None:
            out.append(tok)
    return out


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.k = 0

    def peek(self) -> str | None:
        return self.toks[self.k] if self.k < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise ParamError(f"in {self.text!r}: expected {expected or 'more'}, found {tok or 'the end'}")
        self.k += 1
        return tok

    def done(self) -> None:
        if self.peek() is not None:
            raise ParamError(f"in {self.text!r}: unexpected {self.peek()!r}")


def _int(tok: str, text: str) -> int:
    try:
        value = int(tok, 0)
    except ValueError:
        raise ParamError(f"in {text!r}: expected a number, found {tok!r}") from None
    if value > _MASK64:
        raise ParamError(f"in {text!r}: {tok} does not fit in 64 bits")
    return value


def _bits(r: _Reader) -> tuple[int, int]:
    """`[x:y]` or `_` (all 64 bits) → (x, y)."""
    if r.peek() == "_":
        r.take()
        return 0, 64
    r.take("[")
    x = _int(r.take(), r.text)
    r.take(":")
    y = _int(r.take(), r.text)
    r.take("]")
    if not x < y <= 64:
        raise ParamError(f"in {r.text!r}: the bit range [{x}:{y}] needs x < y <= 64")
    return x, y


def _field(p: int, bits: tuple[int, int]) -> int:
    x, y = bits
    return (p >> x) & ((1 << (y - x)) - 1)


def _bit(r: _Reader) -> int:
    k = _int(r.take(), r.text)
    if k >= 64:
        raise ParamError(f"in {r.text!r}: bit {k} is beyond 63")
    return k


def eval_param(text: str, p: int) -> int:
    """The value of a parameter expression (`_`, `0x3`, `set_bit(2)`, `incr([0:3])`, ...)."""
    r = _Reader(text)
    tok = r.take()
    if tok == "_":
        value = p
    elif tok[0].isdigit():
        value = _int(tok, text)
    else:
        r.take("(")
        if tok in ("set_bit", "clear_bit"):
            k = _bit(r)
            value = p | (1 << k) if tok == "set_bit" else p & ~(1 << k) & _MASK64
        elif tok in ("bit_and", "bit_or"):
            v = _int(r.take(), text)
            value = p & v if tok == "bit_and" else p | v
        elif tok in ("incr", "decr"):
            x, y = _bits(r)
            f = _field(p, (x, y))
            top = (1 << (y - x)) - 1
            if tok == "incr":
                value = p if f == top else (p + (1 << x)) & _MASK64
            else:
                value = p if f == 0 else p - (1 << x)
        else:
            raise ParamError(f"unknown parameter function {tok!r} in {text!r}")
        r.take(")")
    r.done()
    return value


_COMPARE = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def _cond(r: _Reader, p: int) -> bool:
    name = r.take()
    if name == "true" and r.peek() != "(":
        return True
    r.take("(")
    if name == "true":
        result = True
    elif name in ("bit_clear", "bit_set"):
        result = ((p >> _bit(r)) & 1) == (name == "bit_set")
    elif name in ("is_ones", "is_zeros"):
        x, y = _bits(r)
        result = _field(p, (x, y)) == (((1 << (y - x)) - 1) if name == "is_ones" else 0)
    elif name in _COMPARE:
        f = _field(p, _bits(r))
        r.take(",")
        result = _COMPARE[name](f, _int(r.take(), r.text))
    elif name.startswith("bit_count_") and name[10:] in _COMPARE:
        f = _field(p, _bits(r))
        r.take(",")
        result = _COMPARE[name[10:]](bin(f).count("1"), _int(r.take(), r.text))
    elif name in ("and", "or"):
        a = _cond(r, p)
        r.take(",")
        b = _cond(r, p)
        result = (a and b) if name == "and" else (a or b)
    elif name == "not":
        result = not _cond(r, p)
    else:
        raise ParamError(f"unknown condition {name!r} in {r.text!r}")
    r.take(")")
    return result


def eval_condition(text: str, p: int) -> bool:
    """The truth of a `%if` condition for the parameter value `p`."""
    r = _Reader(text)
    result = _cond(r, p)
    r.done()
    return result
