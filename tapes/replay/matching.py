"""Matching live client messages to recorded ones.

Two messages match when their method and their params are the same JSON once volatile parts
are removed: `_meta` (progress tokens, per-request protocol envelope) and a 2026-07-28 retry's
`inputResponses` (the client's answers to the server's input requests, which may say other
things, as an answer to a server request may) everywhere, and the client's self-description in
`initialize`. Matching is a dictionary lookup on a canonical key,
so replaying thousands of identical-looking requests stays linear.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Callable, Hashable, Iterable
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any

from tapes.cassette.scrub import function_spec, load_function
from tapes.errors import UserError
from tapes.wire.jsonrpc import plain
from tapes.wire.pointer import REMOVED, escape, tokens, without

# JSON pointers (relative to params) ignored by default, per method; "*" applies to every method.
VOLATILE_PATHS: dict[str, tuple[str, ...]] = {
    "*": ("/_meta", "/inputResponses"),
    "initialize": ("/clientInfo",),
}

MISSING = object()

_KEY_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False)  # built once: json.dumps builds one per call


def _parsed(paths: dict[str, list[str]]) -> dict[str, list[list[str]]]:
    """JSON pointers per method, split into their unescaped tokens once (not on every request)."""
    return {method: [tokens(pointer) for pointer in pointers] for method, pointers in paths.items()}


def canonical(value: Any) -> Any:
    """JSON numbers compare by value (1 == 1.0) but never equal a boolean."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: canonical(item) for key, item in value.items()}
    if isinstance(value, list):
        return [canonical(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class Difference:
    path: str  # JSON pointer, relative to the message (e.g. "/params/arguments/city")
    recorded: Any
    live: Any

    def describe(self) -> str:
        return f"{self.path or '/'}: {_short(self.recorded)} → {_short(self.live)}"


_PREVIEW = json.JSONEncoder(ensure_ascii=False)


def _short(value: Any, limit: int = 60) -> str:
    if value is MISSING:
        return "(absent)"
    text = ""
    for piece in _pieces(value, limit + 1):  # lazily: a large value is not encoded whole for 60 characters
        text += piece
        if len(text) > limit:
            break
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pieces(value: Any, cut: int) -> Iterator[str]:
    """A JSON value's text (as json.dumps writes it) piece by piece, strings cut to `cut` characters."""
    if isinstance(value, dict):
        yield "{"
        for number, (key, item) in enumerate(value.items()):
            yield (", " if number else "") + _PREVIEW.encode(plain(key)[:cut]) + ": "
            yield from _pieces(item, cut)
        yield "}"
    elif isinstance(value, list):
        yield "["
        for number, item in enumerate(value):
            yield ", " if number else ""
            yield from _pieces(item, cut)
        yield "]"
    else:
        yield _PREVIEW.encode(value[:cut] if isinstance(value, str) else plain(value))


MEMBERS_COUNTED = 64
"""Differing members counted at most when two large values are compared member by member: past
that, a candidate is as far from the live request as any (a request of a million members must not
cost a million differences per candidate)."""


def member_differences(recorded: Any, live: Any, path: str = "") -> list[Difference]:
    """Where two JSON values differ, member by member of the top level only, each member compared
    whole: for values too large to walk in depth. The first MEMBERS_COUNTED of them."""
    if not (isinstance(recorded, dict) and isinstance(live, dict)):
        return [] if type(recorded) is type(live) and recorded == live else [Difference(path, recorded, live)]
    differing = (key for key in chain(recorded, (key for key in live if key not in recorded))
                 if recorded.get(key, MISSING) != live.get(key, MISSING))
    return [Difference(f"{path}/{escape(plain(key))}", recorded.get(key, MISSING), live.get(key, MISSING))
            for key in islice(differing, MEMBERS_COUNTED)]


def differences(recorded: Any, live: Any, path: str = "") -> list[Difference]:
    """Where two JSON values differ, as JSON pointers with both values (absent members included)."""
    if isinstance(recorded, dict) and isinstance(live, dict):
        found: list[Difference] = []
        for key in list(recorded) + [k for k in live if k not in recorded]:
            found += differences(recorded.get(key, MISSING), live.get(key, MISSING), f"{path}/{escape(plain(key))}")
        return found
    if isinstance(recorded, list) and isinstance(live, list) and len(recorded) == len(live):
        found = []
        for index, (left, right) in enumerate(zip(recorded, live, strict=True)):
            found += differences(left, right, f"{path}/{index}")
        return found
    if type(recorded) is bool or type(live) is bool:
        same = recorded is live
    else:
        same = recorded is not MISSING and live is not MISSING and canonical(recorded) == canonical(live)
        same = same or (recorded is MISSING and live is MISSING)
    return [] if same else [Difference(path, recorded, live)]


class Matcher:
    """The default matcher: method + params, minus the volatile paths and any extra ones given.

    A matcher files each request under a `key` (the engine looks candidates up by it, so
    matching stays linear), then `accepts` decides among the candidates filed under the same key.
    """

    name = "default"
    empty_params_are_none = True  # clients differ in sending `"params": {}` or no params for the same request
    # An initialize no recorded one equals plays the first unplayed one anyway (the engine's
    # `_take_handshake`): what differs is the client's version and capabilities, which a real
    # server answers whatever they are. Not where every param must match, or a predicate decides.
    negotiates_handshake = True

    def __init__(self, ignore: Iterable[str] = ()) -> None:
        paths = {method: list(pointers) for method, pointers in VOLATILE_PATHS.items()}
        paths["*"] += ignore
        self._ignore = _parsed(paths)

    def also_ignoring(self, pointers: Iterable[str]) -> Matcher:
        """This matcher, ignoring `pointers` (into params) as well."""
        extra = [tokens(pointer) for pointer in pointers]
        if not extra:
            return self
        widened = copy.copy(self)
        widened._ignore = {**self._ignore, "*": [*self._ignore["*"], *extra]}
        return widened

    def relevant(self, method: str, params: Any) -> Any:
        """The params with what this matcher ignores taken out."""
        for path in self._ignore["*"] + self._ignore.get(method, []):
            stripped = without(params, path)
            params = None if stripped is REMOVED else stripped
        return None if params == {} and self.empty_params_are_none else params

    def key(self, method: str, params: Any) -> Hashable:
        relevant = canonical(self.relevant(method, params))
        try:
            return method, _KEY_ENCODER.encode(relevant)
        except TypeError:  # msgpack's bytes in a recorded request (a map key of them sorts with no text key)
            return method, _KEY_ENCODER.encode(plain(relevant))

    def accepts(self, recorded: dict[str, Any], live: dict[str, Any]) -> bool:
        return True  # the key says it all

    def matches(self, recorded: dict[str, Any], live: dict[str, Any]) -> bool:
        """Whether the live request would play the recorded one (filed under the same key, and accepted)."""
        return (self.key(recorded["method"], recorded.get("params")) == self.key(live["method"], live.get("params"))
                and self.accepts(recorded, live))

    def differences(self, recorded: dict[str, Any], live: dict[str, Any], *, deep: bool = True) -> list[Difference]:
        """Where a live request differs from a recorded one, in what this matcher compares;
        without `deep`, only member by member of the params (for large requests)."""
        found = [] if recorded["method"] == live["method"] else [Difference("/method", recorded["method"], live["method"])]
        return found + (differences if deep else member_differences)(
            self.relevant(recorded["method"], recorded.get("params")),
            self.relevant(live["method"], live.get("params")),
            "/params",
        )


class ExactMatcher(Matcher):
    """Method + every param, `_meta` and `clientInfo` included."""

    name = "exact"
    empty_params_are_none = False
    negotiates_handshake = False

    def __init__(self, ignore: Iterable[str] = ()) -> None:
        super().__init__(ignore)
        self._ignore = _parsed({"*": list(ignore)})


class MethodMatcher(Matcher):
    """The method alone: any params match."""

    name = "method"

    def key(self, method: str, params: Any) -> Hashable:
        return method


class ParamsSubsetMatcher(MethodMatcher):
    """Same method, and every recorded param present in the live request with the same value
    (the live request may carry more)."""

    name = "params-subset"

    def accepts(self, recorded: dict[str, Any], live: dict[str, Any]) -> bool:
        # the only differences allowed are members the recording does not have
        return all(found.recorded is MISSING for found in self.differences(recorded, live))


class CallableMatcher(MethodMatcher):
    """Same method, and a user's predicate `accepts(recorded_request, live_request) -> bool`."""

    negotiates_handshake = False

    def __init__(self, name: str, predicate: Callable[[dict[str, Any], dict[str, Any]], bool], ignore: Iterable[str] = ()) -> None:
        super().__init__(ignore)
        self.name = name
        self._predicate = predicate

    def accepts(self, recorded: dict[str, Any], live: dict[str, Any]) -> bool:
        try:
            return bool(self._predicate(recorded, live))
        except Exception as error:  # the user's code: any exception, told in one sentence (as a hook's is)
            raise UserError(f"matcher {self.name!r} failed on a live {live.get('method')} request ({error!r:.200})") from None


_MATCHERS: dict[str, Callable[[Iterable[str]], Matcher]] = {
    "default": Matcher,
    "exact": ExactMatcher,
    "method": MethodMatcher,
    "params-subset": ParamsSubsetMatcher,
}


_REGISTERED: dict[str, Callable[[dict[str, Any], dict[str, Any]], bool]] = {}


def register_matcher(name: str, predicate: Callable[[dict[str, Any], dict[str, Any]], bool]) -> None:
    """Make `predicate(recorded_request, live_request) -> bool` selectable by `name` (requests
    with the same method are offered to it, in recorded order)."""
    _REGISTERED[name] = predicate
    _MATCHERS[name] = lambda ignore: CallableMatcher(name, predicate, ignore)


def matcher_named(name: str, ignore: Iterable[str] = ()) -> Matcher:
    """A built-in or registered matcher by name, or a predicate named "module:function" or
    "path/to/file.py:function" (how a replay in a process of its own gets a registered one)."""
    ignore = tuple(ignore)
    for pointer in ignore:  # taken as it is, it would point at the whole params: anything would match
        if not pointer.startswith("/"):
            raise UserError(f"ignored path {pointer!r} is not a JSON pointer into params (it must start with /, "
                            "e.g. /arguments/city)")
    if ":" in name and name not in _MATCHERS:
        return CallableMatcher(name, load_function(name, "matcher"), ignore)
    try:
        factory = _MATCHERS[name]
    except KeyError:
        raise UserError(f"there is no matcher named {name!r} (known: {', '.join(sorted(_MATCHERS))}, "
                        "or a module:function predicate)") from None
    return factory(ignore)


def portable_matcher_name(name: str) -> str:
    """The name another process knows the matcher by: a registered predicate as "file.py:function"."""
    predicate = _REGISTERED.get(name)
    return name if predicate is None else function_spec(predicate, f"matcher {name!r}")
