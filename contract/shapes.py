"""A JSON document read from disk against its type (contract.documents' TypedDicts): the keys it
must have and each value's JSON type, so that a file cut short, edited by hand or written for
something else is named in one line before anything reads into it (a KeyError or TypeError deep
in a comparison, after a whole run, otherwise).

`documents.problems` holds writers to their types (missing and unknown keys); this holds what
a reader may index: required keys present, values of their declared JSON types. Unknown keys
are let be (a newer writer's), and a number may be null wherever a float is declared:
summary.json writes a figure that came out NaN as null. Standard library only.
"""

# No `from __future__ import annotations`: get_type_hints must see NotRequired (documents.py).
import types
from collections.abc import Collection
from pathlib import Path
from typing import Literal, TypeVar, Union, get_args, get_origin, get_type_hints, is_typeddict

from contract.documents import read_document
from contract.errors import EvbenchError

Doc = TypeVar("Doc")

# What every reader indexes in a run.json (analysis.inputs, evbench.baseline); older ones lack
# other keys RunDoc requires (a run.json from before `schedule` existed still analyses).
RUN_JSON_NEEDS = ("run_id", "sut", "pace")

_NAMES: dict[object, str] = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    type(None): "null",
}


def shape_problems(value: object, hint: object, where: str = "") -> list[str]:
    """What keeps `value` (parsed JSON) from being a `hint`: a TypedDict's required keys, and
    every value's type, down through lists, dicts and unions; each problem led by where it is
    (`latency_ms.e2e.p99`). Empty when it fits."""
    if is_typeddict(hint):
        return _object_problems(value, hint, where, None)
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        allowed = ", ".join(map(repr, args))
        return [] if value in args else [_at(where, f"{_shown(value)} is not one of {allowed}")]
    if origin in (Union, types.UnionType):
        return _union_problems(value, args, where)
    if origin in (list, dict):
        return _container_problems(value, origin, args, where)
    if _fits(value, hint):
        return []
    return [_at(where, f"expected {_NAMES.get(hint, str(hint))}, got {_json_name(value)}")]


def _object_problems(
    value: object, doc_type: object, where: str, required: Collection[str] | None
) -> list[str]:
    """A TypedDict: its required keys (or only `required`) there, every known key's value of
    its type."""
    if not isinstance(value, dict):
        return [_at(where, f"expected an object, got {_json_name(value)}")]
    needed = vars(doc_type)["__required_keys__"] if required is None else required
    found = [_at(_in(where, key), "missing") for key in sorted(needed) if key not in value]
    for key, hint in get_type_hints(doc_type).items():
        if key in value:
            found += shape_problems(value[key], hint, _in(where, key))
    return found


def _union_problems(value: object, args: tuple[object, ...], where: str) -> list[str]:
    alternatives = [shape_problems(value, arg, where) for arg in args]
    if not all(alternatives):
        return []
    if all(arg in _NAMES for arg in args):  # plain values: say every one that would do
        expected = " or ".join(_NAMES[arg] for arg in args)
        return [_at(where, f"expected {expected}, got {_json_name(value)}")]
    return min(alternatives, key=len)  # the alternative it comes closest to


def _container_problems(
    value: object, origin: object, args: tuple[object, ...], where: str
) -> list[str]:
    if not isinstance(value, list if origin is list else dict):
        return [_at(where, f"expected {_NAMES[origin]}, got {_json_name(value)}")]
    if not args:
        return []
    if isinstance(value, list):
        items = [(f"{where}[{i}]", item) for i, item in enumerate(value)]
    else:
        items = [(_in(where, str(key)), item) for key, item in value.items()]
    return [p for at, item in items for p in shape_problems(item, args[-1], at)]


def _fits(value: object, hint: object) -> bool:
    if hint is float:  # NaN and infinities are written as null (analysis.summary.strict_json)
        return value is None or (isinstance(value, int | float) and not isinstance(value, bool))
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in (str, bool):
        return type(value) is hint
    if hint is type(None):
        return value is None
    return True  # Any, object: no claim on the value


def _in(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _at(where: str, text: str) -> str:
    return f"{where}: {text}" if where else text


def _json_name(value: object) -> str:
    return _NAMES.get(type(value), type(value).__name__)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def read_shaped(
    path: Path, doc_type: type[Doc], what: str, required: Collection[str] | None = None
) -> Doc:
    """The JSON object in `path` as a `doc_type`, its shape checked: an EvbenchError names the
    file and the first thing wrong, then `what` to do (e.g. "analyse the run again").
    `required`: the keys a reader needs, where older writers left out some the type requires
    (run.json)."""
    try:
        doc = read_document(path, doc_type)
    except EvbenchError as exc:
        raise EvbenchError(f"{exc}: {what}") from None
    found = _object_problems(doc, doc_type, "", required)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise EvbenchError(f"{path}: {found[0]}{more}: {what}")
    return doc
