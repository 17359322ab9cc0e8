"""References by URI: `$id` base URIs, `$anchor`, `$dynamicRef`/`$dynamicAnchor` and
`$recursiveRef`/`$recursiveAnchor`, rewritten into plain local `$ref`s before translation.

The compiler resolves a `$ref` as a JSON pointer into the root document (`#/...`), memoises
sub-schemas by content and merges `$ref` targets into the schema that refers to them. All three
assume that a `$ref` string means the same thing wherever it stands, which `$id` breaks: inside a
sub-schema with its own `$id`, `#/$defs/x` and `other.json` resolve against that base URI. So
when a document has more than one base URI or a dynamic reference, `resolve_references`
returns a copy in which every reference that resolves is replaced by the canonical root
pointer of its target (`#/$defs/a/$defs/b`), and the rest of the front-end keeps working with
local pointers only.

Only documents that need it are rewritten (a nested `$id`, a `$ref` not starting with `#`, or
a dynamic reference; the compiler's first walk over the schema finds out), so the common case
pays nothing.

- **Base URIs**: the root's `$id` (or a placeholder) is the first base; an `$id` (draft 4:
  `id`) not starting with `#` starts a new resource at its schema, resolved against the
  enclosing base (RFC 3986). `#name` ids (drafts 6/7) and `$anchor`/`$dynamicAnchor` name
  anchors within the current resource.
- **`$ref`**: resolved against the base where it stands; a fragment is a JSON pointer into the
  target resource (`~0 ~1` and percent escapes) or an anchor name. A pointer that does not
  exist in the resource is tried from the document root (schemas in the wild rely on that),
  an anchor unknown in the resource by name anywhere in the document (as before). What does
  not resolve is left alone, so the compiler reports it as before.
- **`$dynamicRef`** (2020-12): resolved like `$ref`; when that target carries a matching
  `$dynamicAnchor`, the outermost resource of the *dynamic scope* that has one wins. The root
  resource is always the outermost, so when it has the anchor the result is exact; so it is
  when only one resource has it (the bookend is then the target itself). Otherwise the target
  depends on the path of evaluation, through a finite context: `_specialise` copies each
  sub-schema reached by a reference once per context (exact). Past `DYNAMIC_COPIES_MAX` copies
  it becomes an `anyOf` of every resource holding the anchor (marked `DYNAMIC_UNION`; the
  compiler warns: a superset). `$recursiveRef: "#"` (2019-09) is the same with
  `$recursiveAnchor: true` (its context: the outermost resource of the unbroken run of
  resources with the anchor that ends at the current one).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

DEFAULT_BASE = "https://tokensieve.invalid/root.json"
# Keys whose values are data, not schemas: `$id` or `$ref` inside them mean nothing.
_DATA_KEYS = frozenset({"enum", "const", "examples", "example", "default"})
# Keys whose values map names to schemas: there, a key such as `enum` or `default` is a name
# (swagger-2.0 has properties named both) and its value a schema.
_NAME_MAPS = frozenset({"properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies"})


def is_data(key: str, names: bool) -> bool:
    """Whether `key` of a schema object (`names`: of a map from names to schemas) holds data."""
    return not names and key in _DATA_KEYS


def is_name_map(key: str, names: bool) -> bool:
    """Whether the value of `key` of a schema object (`names`: of a name map) is a name map."""
    return not names and key in _NAME_MAPS


def _join(base: str, ref: str) -> str:
    if ref.startswith("#"):
        return base.split("#", 1)[0] + ref
    if urllib.parse.urlsplit(ref).scheme:
        return ref
    return urllib.parse.urljoin(base, ref)


def _resource(uri: str) -> tuple[str, str]:
    res, _, fragment = uri.partition("#")
    return res, urllib.parse.unquote(fragment)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


class _Index:
    """Base URI of every schema object, resources by URI, anchors by (resource, name)."""

    def __init__(self, root: Any, draft4: bool) -> None:
        self.root = root
        self.base_of: dict[str, str] = {}
        self.resources: dict[str, str] = {}  # resource URI → pointer
        self.anchors: dict[tuple[str, str], str] = {}
        self.anchors_by_name: dict[str, str] = {}
        self.dynamic: dict[str, list[tuple[str, str]]] = {}  # name → [(resource, pointer)]
        self.recursive: list[tuple[str, str]] = []  # resources with $recursiveAnchor: true
        root_id = root.get("$id", root.get("id")) if isinstance(root, dict) else None
        base = DEFAULT_BASE
        if isinstance(root_id, str) and root_id and not root_id.startswith("#"):
            base = _join(DEFAULT_BASE, root_id).split("#", 1)[0]
        self.root_base = base
        id_keys = ("$id", "id") if draft4 else ("$id",)
        stack: list[tuple[Any, str, str, bool]] = [(root, "", base, False)]
        while stack:
            node, pointer, base, names = stack.pop()
            if isinstance(node, list):
                stack += [(v, f"{pointer}/{i}", base, False) for i, v in enumerate(node)]
                continue
            if not isinstance(node, dict):
                continue
            for key in id_keys:
                value = node.get(key)
                if isinstance(value, str) and value and not value.startswith("#"):
                    base = _join(base, value).split("#", 1)[0]
                    self.resources.setdefault(base, pointer)
                    break
            if pointer == "":
                self.resources.setdefault(base, "")
            self.base_of[pointer] = base
            for key in ("$anchor", "$dynamicAnchor", "$id", "id"):
                value = node.get(key)
                if not isinstance(value, str) or not value:
                    continue
                if key in ("$id", "id"):
                    if not value.startswith("#") or len(value) < 2:
                        continue
                    value = value[1:]
                self.anchors.setdefault((base, value), pointer)
                self.anchors_by_name.setdefault(value, pointer)
                if key == "$dynamicAnchor":
                    self.dynamic.setdefault(value, []).append((base, pointer))
            if node.get("$recursiveAnchor") is True:
                self.recursive.append((base, pointer))
            for key, value in node.items():
                if not is_data(key, names) and isinstance(value, (dict, list)):
                    stack.append((value, f"{pointer}/{_escape(key)}", base, is_name_map(key, names)))

    def exists(self, pointer: str) -> bool:
        node = self.root
        for raw in pointer[1:].split("/") if pointer else []:
            key = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                return False
        return True

    def node(self, pointer: str) -> Any:
        node = self.root
        for raw in pointer[1:].split("/") if pointer else []:
            key = raw.replace("~1", "/").replace("~0", "~")
            node = node[int(key)] if isinstance(node, list) else node[key]
        return node

    def resolve(self, base: str, ref: str) -> str | None:
        """The canonical root pointer of a `$ref` standing at `base`, or None."""
        res, fragment = _resource(_join(base, ref))
        start = self.resources.get(res)
        if start is None:
            return None
        if fragment == "":
            return start
        if fragment.startswith("/"):
            for candidate in (start + fragment, fragment):
                if self.exists(candidate):
                    return candidate
            return None
        return self.anchors.get((res, fragment), self.anchors_by_name.get(fragment))

    def resolve_dynamic(self, base: str, ref: str) -> str | None:
        """`$dynamicRef`: the static target, or the outermost dynamic anchor when that is
        the same on every path of evaluation (see the module docstring); None otherwise."""
        target = self.resolve(base, ref)
        _, name = _resource(_join(base, ref))
        if target is None or not name or name.startswith("/"):
            return target
        node = self.node(target)
        if not (isinstance(node, dict) and node.get("$dynamicAnchor") == name):
            return target  # no bookend: a plain $ref
        holders = self.dynamic.get(name, [])
        for res, pointer in holders:
            if res == self.root_base:
                return pointer
        return holders[0][1] if len(holders) == 1 else None

    def dynamic_candidates(self, base: str, ref: str) -> list[str]:
        """Every place a `$dynamicRef` whose target depends on the path of evaluation may
        resolve to: the resources holding its dynamic anchor (empty when it has no target)."""
        target = self.resolve(base, ref)
        _, name = _resource(_join(base, ref))
        return [] if target is None or not name else [pointer for _, pointer in self.dynamic.get(name, [])]

    def recursive_candidates(self, base: str, ref: str) -> list[str]:
        """The same for `$recursiveRef`: the resources with `$recursiveAnchor: true`."""
        return [pointer for _, pointer in self.recursive] if ref == "#" and self.resolve(base, ref) is not None else []

    def resolve_recursive(self, base: str, ref: str) -> str | None:
        target = self.resolve(base, ref)
        if ref != "#" or target is None:
            return target
        node = self.node(target)
        if not (isinstance(node, dict) and node.get("$recursiveAnchor") is True):
            return target
        for res, pointer in self.recursive:
            if res == self.root_base:
                return pointer
        return self.recursive[0][1] if len(self.recursive) == 1 else None


def _attach_refs(out: dict[str, Any], refs: list[str]) -> None:
    """Add resolved references to a rewritten schema object: the first as its `$ref` (when it
    has none), the others as `allOf` parts."""
    for ref in refs:
        if "$ref" not in out:
            out["$ref"] = ref
        else:
            out["allOf"] = [*out.get("allOf", []), {"$ref": ref}]


# Marks the anyOf standing for a path-dependent `$dynamicRef` (its value: the keyword's pointer).
DYNAMIC_UNION = "_dynamic_union"


def _local(pointer: str) -> str:
    return "#" + urllib.parse.quote(pointer, safe="/~!$&'()*+,;=:@")


def resolve_references(root: Any, *, draft4: bool = False) -> Any:
    """A copy of `root` whose resolvable `$ref`, `$dynamicRef` and `$recursiveRef` are
    `$ref`s to canonical root pointers (see the module docstring)."""
    index = _Index(root, draft4)

    def rewrite(node: Any, pointer: str, names: bool = False) -> Any:
        if isinstance(node, list):
            return [rewrite(v, f"{pointer}/{i}") for i, v in enumerate(node)]
        if not isinstance(node, dict):
            return node
        base = index.base_of.get(pointer, index.root_base)
        out: dict[str, Any] = {}
        extra_refs: list[str] = []
        unions: list[dict[str, Any]] = []
        for key, value in node.items():
            if is_data(key, names):
                out[key] = value
            elif key == "$ref" and isinstance(value, str):
                target = index.resolve(base, value)
                out[key] = value if target is None else _local(target)
            elif key in ("$dynamicRef", "$recursiveRef") and isinstance(value, str):
                target = (index.resolve_dynamic if key == "$dynamicRef" else index.resolve_recursive)(base, value)
                candidates = [] if target is not None else (
                    index.dynamic_candidates(base, value) if key == "$dynamicRef" else index.recursive_candidates(base, value)
                )
                if target is not None:
                    extra_refs.append(_local(target))
                elif len(candidates) > 1:
                    # The target depends on the path: any of them (DYNAMIC_UNION, the compiler warns).
                    unions.append({"anyOf": [{"$ref": _local(c)} for c in candidates], DYNAMIC_UNION: f"{pointer}/{key}"})
                else:
                    out[key] = value
            else:
                out[key] = rewrite(value, f"{pointer}/{_escape(key)}", is_name_map(key, names))
        _attach_refs(out, extra_refs)
        if unions:
            out["allOf"] = [*out.get("allOf", []), *unions]
        return out

    try:
        specialised = _specialise(root, index) if _path_dependent(root, index) else None
        return rewrite(root, "") if specialised is None else specialised
    except RecursionError:  # deeper than Python's stack: the compiler's depth limit reports it
        return root


# Copies of sub-schemas per dynamic scope that `_specialise` may make before it gives up (the
# union then stands instead, a superset with a warning).
DYNAMIC_COPIES_MAX = 256
_COPY_KEY = "__tokensieve_dynamic_{}"
_RECURSIVE = "#recursive"  # the context's entry for $recursiveAnchor (not an anchor name)


def _path_dependent(root: Any, index: _Index) -> bool:
    """Whether some `$dynamicRef` or `$recursiveRef` of `root` resolves differently by the
    path of evaluation."""
    if not any(len(places) > 1 for places in index.dynamic.values()) and len(index.recursive) < 2:
        return False
    stack: list[tuple[Any, str, bool]] = [(root, "", False)]
    while stack:
        node, pointer, names = stack.pop()
        if isinstance(node, list):
            stack += [(v, f"{pointer}/{i}", False) for i, v in enumerate(node)]
            continue
        if not isinstance(node, dict):
            continue
        base = index.base_of.get(pointer, index.root_base)
        ref = node.get("$dynamicRef")
        if isinstance(ref, str) and index.resolve_dynamic(base, ref) is None and len(index.dynamic_candidates(base, ref)) > 1:
            return True
        ref = node.get("$recursiveRef")
        if isinstance(ref, str) and index.resolve_recursive(base, ref) is None and len(index.recursive_candidates(base, ref)) > 1:
            return True
        for key, value in node.items():
            if not is_data(key, names) and isinstance(value, (dict, list)):
                stack.append((value, f"{pointer}/{_escape(key)}", is_name_map(key, names)))
    return False


def _specialise(root: Any, index: _Index) -> Any | None:
    """`root` with every reference resolved exactly in its dynamic scope, or None when that
    takes more than `DYNAMIC_COPIES_MAX` copies (or the root is not an object).

    A `$dynamicRef` to a dynamic anchor resolves to the anchor of the outermost resource that
    defines it among those evaluation has entered (by nesting or by reference). Which one
    that is depends on the path, but only through a finite *context*: for each anchor name,
    the first entered resource defining it. So each sub-schema reached by a reference is
    copied once per context it is reached in (`$defs/__tokensieve_dynamic_k`), every
    reference inside a copy resolved in that copy's context: the grammar follows the path.
    `$recursiveRef` (2019-09) is the same with one more entry in the context, under the name
    `_RECURSIVE`: the outermost resource of the unbroken run of resources with
    `$recursiveAnchor: true` ending at the current one ("" when the current one has none).
    """
    if not isinstance(root, dict):
        return None
    holders: dict[tuple[str, str], str] = {}  # (resource, anchor name) → pointer
    for name, places in index.dynamic.items():
        for res, pointer in places:
            holders.setdefault((res, name), pointer)
    names = sorted(index.dynamic)
    recursive = {res: pointer for res, pointer in reversed(index.recursive)}  # resource → its root
    Context = tuple[tuple[str, str], ...]  # (name, holder pointer), sorted by name

    def enter(context: Context, res: str) -> Context:
        bound = dict(context)
        for name in names:
            if name not in bound and (res, name) in holders:
                bound[name] = holders[(res, name)]
        if recursive:
            bound[_RECURSIVE] = (bound.get(_RECURSIVE) or recursive[res]) if res in recursive else ""
        return tuple(sorted(bound.items()))

    copies: dict[tuple[str, Context], str] = {}
    pending: list[tuple[str, Context, str]] = []

    def copy_of(pointer: str, context: Context) -> str:
        """The copy of the sub-schema at `pointer` entered with `context` (made later)."""
        context = enter(context, index.base_of.get(pointer, index.root_base))
        key = copies.get((pointer, context))
        if key is None:
            if len(copies) >= DYNAMIC_COPIES_MAX:
                raise _TooManyCopies
            key = copies[(pointer, context)] = _COPY_KEY.format(len(copies))
            pending.append((pointer, context, key))
        return "#/$defs/" + key

    def rewrite(node: Any, pointer: str, context: Context, outer: str, names: bool = False) -> Any:
        if isinstance(node, list):
            return [rewrite(v, f"{pointer}/{i}", context, outer) for i, v in enumerate(node)]
        if not isinstance(node, dict):
            return node
        base = index.base_of.get(pointer, index.root_base)
        if base != outer:
            context = enter(context, base)  # a nested resource: entered by nesting
        out: dict[str, Any] = {}
        refs: list[str] = []
        for key, value in node.items():
            if is_data(key, names):
                out[key] = value
            elif key == "$ref" and isinstance(value, str):
                target = index.resolve(base, value)
                if target is None:
                    out[key] = value
                else:
                    refs.append(copy_of(target, context))
            elif key == "$dynamicRef" and isinstance(value, str):
                target = index.resolve(base, value)
                _, name = _resource(_join(base, value))
                if target is None:
                    out[key] = value
                    continue
                node_at = index.node(target)
                if name and not name.startswith("/") and isinstance(node_at, dict) and node_at.get("$dynamicAnchor") == name:
                    # A bookend: the outermost entered resource with the anchor, else the
                    # target's own resource (entered by following the reference).
                    target = dict(context).get(name, target)
                refs.append(copy_of(target, context))
            elif key == "$recursiveRef" and isinstance(value, str):
                target = index.resolve(base, value)
                if target is None:
                    out[key] = value
                    continue
                node_at = index.node(target)
                if value == "#" and isinstance(node_at, dict) and node_at.get("$recursiveAnchor") is True:
                    target = dict(context).get(_RECURSIVE) or target
                refs.append(copy_of(target, context))
            else:
                out[key] = rewrite(value, f"{pointer}/{_escape(key)}", context, base, is_name_map(key, names))
        _attach_refs(out, refs)
        return out

    try:
        out = rewrite(root, "", enter((), index.root_base), index.root_base)
        made: dict[str, Any] = {}
        while pending:
            pointer, context, key = pending.pop()
            base = index.base_of.get(pointer, index.root_base)
            made[key] = rewrite(index.node(pointer), pointer, context, base)
    except _TooManyCopies:
        return None
    defs = out.get("$defs")
    out["$defs"] = {**(defs if isinstance(defs, dict) else {}), **made}
    return out


class _TooManyCopies(Exception):
    """`_specialise` gives up: the union of the targets stands instead."""
