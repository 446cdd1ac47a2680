"""Plain data across a process boundary: exact builtin values as tagged JSON, with caps.

The assert harness (harness.py) and the program's call server (pyrun.serve_calls) exchange only
this: ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``, ``list``, ``tuple``,
``set``, ``frozenset``, ``dict`` and (as a list the reader iterates) an iterator or generator.
Subclasses of builtins are converted through the base type's own C methods (their overrides never
run on the reader's side); numpy values through ``tolist()``; anything else is ``NotPlain``.

Caps, enforced by the reader as well as the writer (the other side may be hostile): nesting depth
``MAX_DEPTH``, line length (the caller's byte cap), no hashing of attacker-chosen JSON object keys
while parsing (objects are read as pair lists; only the single-key tag objects are accepted).
Standard library only.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # typing's own flag without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 100
MAX_ITEMS = 10_000_000  # elements an iterator result may yield before it counts as not plain


class NotPlain(Exception):
    """A value that is not plain data (a custom object, too deep, too many items)."""


def _iterator_items(x: Any, d: int) -> list[object]:
    out: list[object] = []
    for v in x:
        if len(out) >= MAX_ITEMS:
            raise NotPlain("iterator too long")
        out.append(plain(v, d))
    return out


def plain(x: Any, depth: int = 0) -> object:
    """``x`` as exact builtin data (see the module docstring); raises NotPlain."""
    t = type(x)
    if x is None or t is bool or t is int or t is float or t is str or t is bytes or t is complex:
        return x
    if depth > MAX_DEPTH:
        raise NotPlain("nested too deeply")
    d = depth + 1
    if t is list:
        return [plain(v, d) for v in x]
    if t is tuple:
        return tuple(plain(v, d) for v in x)
    if t is dict:
        return {plain(k, d): plain(v, d) for k, v in dict.items(x)}
    if t is set or t is frozenset:
        return t(plain(v, d) for v in x)
    for base, to_base in _BASES:
        if issubclass(t, base):
            return plain(to_base(x), d)
    if getattr(t, "__module__", "") == "numpy" and hasattr(x, "tolist"):
        return plain(x.tolist(), d)
    if t.__module__ == "builtins" and t.__name__ in _VIEWS:
        return _iterator_items(x, d)
    if t.__module__ == "builtins" and t.__name__ in _ITERATORS:
        return _Iter(_iterator_items(x, d))
    raise NotPlain(getattr(t, "__qualname__", "?"))


class _Iter(list):  # type: ignore[type-arg]
    """An iterator result, materialized (the reader gets an iterator over it)."""


_ITERATORS = {
    "generator",
    "map",
    "filter",
    "zip",
    "enumerate",
    "reversed",
    "list_iterator",
    "tuple_iterator",
    "range_iterator",
    "set_iterator",
    "dict_keyiterator",
    "dict_valueiterator",
    "dict_itemiterator",
    "str_ascii_iterator",
    "str_iterator",
    "list_reverseiterator",
}
_VIEWS = {"dict_keys", "dict_values", "dict_items", "range"}  # sent as lists
_BASES = (
    (int, int.__int__),
    (float, float.__float__),
    (str, str.__str__),
    (bytes, lambda b: bytes.__getitem__(b, slice(None))),
    (list, list.copy),
    (tuple, lambda v: tuple.__getitem__(v, slice(None))),
    (dict, dict.copy),
    (set, set.copy),
    (frozenset, frozenset.copy),
    (complex, lambda c: complex(complex.__getattribute__(c, "real"), complex.__getattribute__(c, "imag"))),
)


def encode(x: object) -> object:
    """Plain data (the output of ``plain``) as tagged JSON."""
    t = type(x)
    if x is None or t is bool or t is str:
        return x
    if t is int:
        return {"i": hex(x)}  # type: ignore[arg-type]
    if t is float:
        return {"f": x.hex()}  # type: ignore[attr-defined]
    if t is complex:
        return {"c": [x.real.hex(), x.imag.hex()]}  # type: ignore[attr-defined]
    if t is bytes:
        return {"b": x.hex()}  # type: ignore[attr-defined]
    if t is list:
        return [encode(v) for v in x]  # type: ignore[attr-defined]
    if t is _Iter:
        return {"g": [encode(v) for v in x]}  # type: ignore[attr-defined]
    if t is tuple:
        return {"t": [encode(v) for v in x]}  # type: ignore[attr-defined]
    if t is set or t is frozenset:
        return {"s" if t is set else "S": [encode(v) for v in x]}  # type: ignore[attr-defined]
    if t is dict:
        return {"d": [[encode(k), encode(v)] for k, v in x.items()]}  # type: ignore[attr-defined]
    raise NotPlain(t.__qualname__)


def dumps(x: object) -> bytes:
    """One line: ``x`` made plain and encoded (raises NotPlain, RecursionError)."""
    return json.dumps(encode(plain(x)), separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"


def _pairs(pairs: list[tuple[str, object]]) -> list[tuple[str, object]]:
    return pairs  # JSON objects stay pair lists: no hashing of the writer's keys while parsing


def loads(line: bytes) -> object:
    """The value of one ``dumps`` line, checked on the way (raises ValueError)."""
    try:
        raw = json.loads(line.decode("utf-8", "surrogatepass"), object_pairs_hook=_pairs)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    return decode(raw)


def decode(obj: Any, depth: int = 0) -> Any:
    """Tagged JSON (parsed with objects as pair lists) back to a value; raises ValueError."""
    if depth > 2 * MAX_DEPTH + 2:
        raise ValueError("nested too deeply")
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if type(obj) is list:
        if len(obj) == 1 and type(obj[0]) is tuple:  # a one-key object: a tag
            return _tagged(obj[0][0], obj[0][1], depth)
        return [decode(v, depth + 1) for v in obj]
    raise ValueError(f"not an encoded value: {type(obj).__name__}")


def _tagged(tag: str, v: Any, depth: int) -> Any:
    d = depth + 1
    if tag == "i" and type(v) is str:
        return int(v, 16)
    if tag == "f" and type(v) is str:
        return float.fromhex(v)
    if tag == "c" and type(v) is list and len(v) == 2:
        return complex(float.fromhex(v[0]), float.fromhex(v[1]))
    if tag == "b" and type(v) is str:
        return bytes.fromhex(v)
    if type(v) is not list:
        raise ValueError(f"bad tagged value {tag!r}")
    if tag == "t":
        return tuple(decode(x, d) for x in v)
    if tag == "g":
        return iter([decode(x, d) for x in v])
    if tag == "s":
        return {decode(x, d) for x in v}
    if tag == "S":
        return frozenset(decode(x, d) for x in v)
    if tag == "d":
        out = {}
        for pair in v:
            if type(pair) is not list or len(pair) != 2:
                raise ValueError("bad dict item")
            out[decode(pair[0], d)] = decode(pair[1], d)
        return out
    raise ValueError(f"unknown tag {tag!r}")
