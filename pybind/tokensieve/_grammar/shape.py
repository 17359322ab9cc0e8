"""The shape of a grammar given as Python objects (a JSON Schema, a structural tag): a tree, or
sharing that stays small.

JSON text always parses to a tree. Objects built in Python, or loaded from YAML (whose anchors
and aliases put one node in several places), may hold one dict or list in several places, or
hold one inside itself. The front-ends' walks take their input as a tree, so a shared node is
walked once per place it holds: with two-way sharing, 18 levels compiled in 3.2 s, 22 in 69 s,
and 24 ran the process out of memory (a `marshal` form and a resolved copy of every place), and
a cycle kept `embed_meta_schema`'s walk going for ever. So `check_tree_shaped` runs first, where
such values come in (`Grammar.json_schema` and `Grammar.structural_tag` given objects; the
schemas inside a structural tag are parts of one already checked, and JSON text needs none):
it refuses a cycle, naming its place, and sharing that expands, counting each node once per
place, past `EXPANDED_CONTAINER_COUNT_MAX` objects and arrays (14 times MaskBench's largest
schema). Less sharing than that is kept: every walk after it is bounded as for a tree of that
size.

How it costs almost nothing on a tree: `marshal.dumps(value, 4)` (C speed: 0.34 ms on
MaskBench's largest schema, kb_1161, and a few µs on a median one) writes a node met a second
time as a reference, so the form is as long as the distinct nodes, and flags (bit 0x80 of its
type byte) each container whose reference count is above one when it is written, as every
shared node's is (two places hold it). A form whose only flagged container is its first byte
(the root: the caller holds it) comes from a tree, or from a value whose only cycle runs
through the root, which `marshal.dumps(value, 2)` refuses as too deep: the JSON Schema
front-end makes that form next and then asks `check_tree_shaped_exactly`. A flag byte may
also be payload (a length, text, a float): each candidate is checked against what the form
holds there (`_flagged_container_at`), and a candidate that passes, or too many candidates,
send the value to the walk that decides (`check_tree_shaped_exactly`). On MaskBench 2 of 11,305 schemas
take the walk, neither of them among the slowest to compile.
"""

from __future__ import annotations

import marshal
from typing import Any

from .._errors import GrammarError

# Objects and arrays a value may expand to, counted once per place, when it shares some
# (MaskBench's largest schema, cityjson, has 14,434 in all; an object whose two properties are
# the same object below it makes 196,606 at 16 levels, 393,214 at 17).
EXPANDED_CONTAINER_COUNT_MAX = 200_000

# marshal's type codes (Python/marshal.c), and the flag it sets on an object it may refer
# back to.
_FLAG_REF = 0x80
_TYPE_CODES = frozenset(b"0NFTS.ilgysrt()[{cu?<>aAzZ")
_DICT, _LIST = ord("{"), ord("[")  # a list's 4-byte count follows its type byte
_ONE_BYTE = frozenset(b"0NFTS.")  # a dict's end, None, False, True, ...: the type byte alone
_SHORT_TEXT = frozenset(b"zZ")  # a one-byte length, then the text
_TEXT = frozenset(b"aAuts")  # a four-byte length, then the text
_FIXED_SIZES = {ord("i"): 5, ord("r"): 5, ord("g"): 9, ord("y"): 17}  # an int, a reference, a float, a complex
# Candidate flag bytes checked one by one before the walk decides instead, and the entries
# read after each (payload that happens to hold a flag byte rarely reads as three entries).
_CANDIDATES_MAX = 64
_ENTRIES_CHECKED = 3

_CONTAINERS = (dict, list, tuple, set, frozenset)


def check_tree_shaped(value: Any, what: str = "the schema") -> None:
    """Refuse `value` if its shared nodes expand past `EXPANDED_CONTAINER_COUNT_MAX` objects
    and arrays, or if a node below the root holds itself (see the module's docstring). A cycle
    through the root alone flags nothing in the form: the callers' own serialisation refuses
    it next (the JSON Schema front-end's `marshal.dumps(value, 2)`, too deep, then calls
    `check_tree_shaped_exactly`; the structural tag's `json.dumps` names the cycle).

    Raises:
        GrammarError: naming the place (`json_pointer`) of the cycle or of the node whose
            expansion went past the limit first.
    """
    if not isinstance(value, _CONTAINERS):
        return
    try:
        form = marshal.dumps(value, 4)
    except ValueError:  # a type marshal refuses (a subclass), or nested too deep
        form = None
    if form is None or _may_share(form):
        check_tree_shaped_exactly(value, what)


def _may_share(form: bytes) -> bool:
    """Whether a version 4 `marshal` form may hold a shared dict or list, or a cycle below the
    root: a flagged one after the first byte (the root's). Tuples and sets are not looked for:
    they are not JSON (the compiler refuses them), and data from outside (JSON text, YAML)
    has none; flag bytes of theirs read as text too often (`é` is C3 A9, a flagged small
    tuple of 195 items)."""
    checked = 0
    for code in (_DICT, _LIST):
        flagged = bytes((code | _FLAG_REF,))
        at = form.find(flagged, 1)
        while at >= 0:
            checked += 1
            if checked > _CANDIDATES_MAX or _flagged_container_at(form, at):
                return True
            at = form.find(flagged, at + 1)
    return False


def _flagged_container_at(form: bytes, at: int) -> bool:
    """Whether the flag byte at `at` can be a flagged dict or list that is not empty (an empty
    one expands to nothing): what follows must read as what marshal writes after one, its
    first entries (a dict's keys and values) and the type of what comes next. Conservative:
    True unless the bytes cannot be one, or where an entry is a container (not followed
    further)."""
    end = len(form)
    if form[at] & ~_FLAG_REF == _LIST:
        if at + 5 >= end:
            return False
        count = int.from_bytes(form[at + 1 : at + 5], "little")
        return 0 < count <= end and _entry_fits(form, at + 5, min(count, _ENTRIES_CHECKED))
    # A dict: its first key and value, or `0` (its end) at once when it is empty.
    if at + 1 >= end or form[at + 1] == ord("0"):
        return False
    return _entry_fits(form, at + 1, 2 * _ENTRIES_CHECKED)  # (keys and values)


def _entry_fits(form: bytes, at: int, items: int) -> bool:
    """Whether `items` objects can start at `at`, each a type byte and its payload, followed by
    a type byte (what comes next: an item, a dict's end `0`, or whatever follows the container
    in the form, read on the same way); True as soon as one is a container, or at the form's
    end."""
    end = len(form)
    for _ in range(items + 1):
        if at == end:
            return True
        if at > end or not _is_type(form[at]):
            return False
        after = _after(form, at)
        if after is None:
            return True
        at = after
    return True


def _after(form: bytes, at: int) -> int | None:
    """Where the object starting at `at` ends, for the types of fixed or given length; None for
    the others (containers, long ints, code)."""
    code = form[at] & ~_FLAG_REF
    if code in _ONE_BYTE:
        return at + 1
    if code in _SHORT_TEXT:  # a one-byte length
        return at + 2 + form[at + 1] if at + 1 < len(form) else len(form)
    if code in _TEXT:  # a four-byte length
        return at + 5 + int.from_bytes(form[at + 1 : at + 5], "little")
    size = _FIXED_SIZES.get(code)
    return None if size is None else at + size


def _is_type(byte: int) -> bool:
    return (byte & ~_FLAG_REF) in _TYPE_CODES


def check_tree_shaped_exactly(value: Any, what: str = "the schema") -> None:
    """`check_tree_shaped` by a walk of every distinct dict, list, tuple and set, each visited
    once (its count of places below it is kept by identity, so sharing costs nothing): for
    values the form does not settle, and for those `marshal.dumps(value, 2)` refused."""
    if not isinstance(value, _CONTAINERS):
        return
    sizes: dict[int, int] = {}
    open_ids = {id(value)}
    # Depth-first, explicit stack: [node, its (key, child) pairs, its pointer, its count so far].
    stack: list[list[Any]] = [[value, _children(value), "", 1]]
    while stack:
        top = stack[-1]
        for key, child in top[1]:
            if not isinstance(child, _CONTAINERS):
                continue
            known = sizes.get(id(child))
            if known is not None:
                top[3] += known
                continue
            pointer = f"{top[2]}/{_escape(key)}"
            if id(child) in open_ids:
                raise GrammarError(
                    f"{what} holds itself at {pointer or '/'} (a cycle): JSON values are trees; "
                    "to reuse a schema, refer to it with $ref",
                    json_pointer=pointer,
                )
            open_ids.add(id(child))
            stack.append([child, _children(child), pointer, 1])
            break
        else:
            stack.pop()
            node, _, pointer, size = top
            open_ids.discard(id(node))
            if size > EXPANDED_CONTAINER_COUNT_MAX:
                raise GrammarError(
                    f"{what} shares objects or arrays between places, and counted once per place "
                    f"those at {pointer or '/'} are more than {EXPANDED_CONTAINER_COUNT_MAX:,}: "
                    "reuse a schema with $ref (defined once under $defs) instead of placing the "
                    "same object in several places",
                    json_pointer=pointer,
                )
            sizes[id(node)] = size
            if stack:
                stack[-1][3] += size


def _children(node: Any) -> Any:
    """(key, child) pairs of a container: a dict's values by key, a sequence's or set's items
    by index."""
    return iter(node.items()) if isinstance(node, dict) else enumerate(node)


def _escape(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


# Nodes `find_non_json_data` looks at before it gives up (it runs after a failure only).
_FIND_STEPS_MAX = 2_000_000


def find_non_json_data(value: Any) -> tuple[str, str] | None:
    """The JSON pointer of the first place in `value` that JSON text cannot hold and that code
    written for JSON data trips on, with a message: a dict key that is not a string, or an
    integer with more digits than Python writes as text (`sys.get_int_max_str_digits()`).
    None when there is none (within `_FIND_STEPS_MAX` nodes). Asked after a translation
    failed with a Python error, to turn it into a `GrammarError` at its place."""
    import sys

    digits_max = getattr(sys, "get_int_max_str_digits", lambda: 0)()
    too_long = 10**digits_max if digits_max else None
    stack: list[tuple[Any, str]] = [(value, "")]
    seen: set[int] = set()
    steps = 0
    while stack and steps < _FIND_STEPS_MAX:
        node, pointer = stack.pop()
        steps += 1
        if isinstance(node, dict):
            if id(node) in seen:
                continue
            seen.add(id(node))
            for key in node:
                if not isinstance(key, str):
                    hint = f": write {str(key)!r}" if type(key) in (int, float) else ""
                    return pointer, f"the key {key!r} is not a string (JSON object keys are strings){hint}"
            stack.extend((child, f"{pointer}/{_escape(key)}") for key, child in reversed(node.items()))
        elif isinstance(node, list):
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.extend((child, f"{pointer}/{index}") for index, child in reversed(list(enumerate(node))))
        elif type(node) is int and too_long is not None and abs(node) >= too_long:
            return pointer, (
                f"an integer of more than {digits_max:,} digits, the most Python writes as text "
                "(sys.set_int_max_str_digits raises that limit)"
            )
    return None
