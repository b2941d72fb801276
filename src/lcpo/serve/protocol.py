"""The serving protocol as a deterministic state machine over log records, and strict request validation.

**Streams and decisions.** A stream is one source of experience (one proxy, one client). Every action the
server answers is a *decision*, numbered ``0, 1, 2, ...`` across all streams in log order (id ``"d<n>"``).
Each stream holds a FIFO of *outstanding* decisions (answered, reward not yet known):

* ``step`` (Park's convention, one round trip per step): ``reward``/``terminated``/``truncated`` belong to the
  stream's previous action. ``reward: null`` starts the stream (or starts it afresh, dropping an outstanding
  decision, which is never learned from: this is how a client recovers from a lost answer); otherwise the
  stream must have exactly one outstanding decision, which the request resolves into a transition
  ``(its obs, its action, reward, next_obs, terminated, truncated, info)``. When the previous action ended the
  episode (``terminated`` or ``truncated``), ``obs`` is the first observation of the next episode and
  ``final_obs`` (required then, refused otherwise) is the real observation reached, the transition's
  ``next_obs``; else ``next_obs = obs``. A new decision is then made on ``obs``.
* ``act`` appends a decision; ``observe`` resolves one with ``reward``, ``next_obs`` and the flags. A stream's
  decisions are observed in the order they were made (the oldest outstanding first), so each stream's
  transitions stay in order.

**Records.** Each accepted request is one log record (a JSON object, see :class:`ServerState.apply`;
observations in it are float32 arrays, written by the log as exact base64 bytes, :func:`vec`); the
state (streams, outstanding decisions, counters) is a function of the records alone, so replaying the log
rebuilds it exactly. Validation (:meth:`ServerState.check_step` etc.) reads the state and never changes it: a
refused request changes nothing.
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from typing import Any

import numpy as np

from lcpo.numerics.finite import F32_MAX
from lcpo.online.loop import Transition
from lcpo.persistence.strict_json import (BeyondFloat64, DuplicateKeyError, parse_float, show,  # noqa: F401
                                          unique_object)  # (BeyondFloat64, DuplicateKeyError, unique_object: re-exported)

try:  # optional (the serve extra): 5-10x faster than the json module on request bodies, answers and records
    import orjson
except ImportError:  # pragma: no cover - exercised where orjson is not installed
    orjson = None

__all__ = ["RequestError", "Limits", "Spaces", "ServerState", "INFO_KEYS", "DuplicateKeyError", "unique_object",
           "loads", "dumps", "batch_steps", "batch_entry", "BeyondFloat64"]


def loads(data: bytes | str) -> Any:
    """Parse a JSON document: what ``json.loads`` returns, except that an object with a repeated key is refused
    and a float literal float64 cannot hold is a :class:`BeyondFloat64` (as below); faster where orjson is installed.

    orjson parses a strict subset of what ``json.loads`` accepts. Where it refuses a document (``NaN``,
    ``Infinity``, a number beyond float64 such as ``1e999``, a byte-order mark, UTF-16/32, a lone surrogate,
    nesting deeper than 1,024), ``json.loads`` decides, exactly as without orjson: a body with a NaN still parses
    and is then refused with a 422 naming the field, not a 400. One difference remains: orjson reads an integer
    beyond 64 bits as a float, which validation turns into the same float32 or float64 value either way.

    Repeated keys: orjson, like ``json.loads``, keeps the last value silently. Every object member has one colon
    outside the strings, and ``orjson.dumps`` writes the colons inside strings as they are, so a document without
    ``\\u`` escapes (which could spell a colon ``\\u003a``) holds as many colons as its re-encoding exactly when
    no member was dropped. Otherwise (or where orjson is not installed, or the document is nested too deeply for
    ``orjson.dumps``) ``json.loads`` with :func:`unique_object` decides and names the key.

    A float literal beyond float64's range (``1e400``), which ``json.loads`` reads as an infinity, is returned as
    :class:`lcpo.persistence.strict_json.BeyondFloat64`: that infinity, quoted as written, so validation refuses
    it as ``reward = 1e400 is beyond float64's range`` (as it refuses an integer of 400 digits), not as "must be
    finite, got inf", which names a value the client never sent. (A nonzero literal below float64's smallest
    subnormal, ``1e-400``, is one too: its value 0.0 is accepted, as by ``json.loads``.)

    Args:
        data: the document, UTF-8 bytes (or UTF-16/32, as ``json.loads`` detects) or str.

    Raises:
        DuplicateKeyError: an object holds a key twice (a ``ValueError``).
        ValueError, UnicodeDecodeError, RecursionError: as ``json.loads`` does, for a document it refuses.
    """
    if orjson is not None:
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            text = isinstance(data, str)
            try:
                same = orjson.dumps(doc).count(b":") == data.count(":" if text else b":")
            except TypeError:  # orjson.JSONEncodeError: nested deeper than orjson.dumps writes
                same = False
            if same and ("\\u" if text else b"\\u") not in data:
                return doc
    return json.loads(data, object_pairs_hook=unique_object, parse_float=parse_float)


def dumps(obj: Any, default=None) -> bytes:
    """Compact JSON bytes of ``obj`` (orjson where installed, else ``json.dumps`` with the same separators).

    Only finite floats may be passed: orjson writes NaN as ``null`` where ``json.dumps`` raised (every float
    that reaches an answer or a log record was validated finite or is a counter).

    Args:
        obj: dicts, lists, strings, ints, finite floats, booleans, None.
        default: called with any other object; returns a JSON-able replacement or raises ``TypeError``.

    Raises:
        TypeError: an object neither JSON-able nor handled by ``default``.
    """
    if orjson is not None:
        return orjson.dumps(obj, default=default)
    return json.dumps(obj, separators=(",", ":"), allow_nan=False, default=default).encode()

#: Stream names: 1-128 characters of letters, digits and ``. _ : @ / -``.
STREAM_RE = re.compile(r"[A-Za-z0-9._:@/\-]{1,128}\Z")
#: Keys allowed in a transition's ``info`` object and what they mean to the agents (architecture.md,
#: "Transitions"): a time-dependent discount and an action overridden by the system.
INFO_KEYS = ("gamma", "forced")


class RequestError(Exception):
    """A refused request: HTTP status and a one-line message that names the bad field.

    Attributes:
        status: 400 (malformed body), 401, 404 (unknown stream or decision), 409 (conflict with the stream's
            state, e.g. a duplicate observe), 413, 415, 422 (a bad field), 429 (a limit reached).
        field: the offending field (``"obs[3]"``, ``"decision"``), or None.
    """

    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status, self.field = int(status), field


class Limits:
    """Bounds on what clients may make the server hold.

    Args:
        max_streams: streams the server tracks at once.
        max_outstanding: outstanding decisions per stream.
    """

    def __init__(self, max_streams: int = 10_000, max_outstanding: int = 1024):
        self.max_streams, self.max_outstanding = int(max_streams), int(max_outstanding)


class Spaces:
    """The served system's spaces as validation needs them.

    Args:
        observation_space: a 1-D ``gymnasium.spaces.Box``.
        action_space: ``Discrete(n)`` or ``MultiDiscrete([k] * D)``.
    """

    def __init__(self, observation_space, action_space):
        import gymnasium as gym

        self.obs_dim = int(observation_space.shape[0])
        self.low = np.asarray(observation_space.low, dtype=np.float32).reshape(-1)
        self.high = np.asarray(observation_space.high, dtype=np.float32).reshape(-1)
        self.bounded = bool(np.isfinite(self.low).any() or np.isfinite(self.high).any())
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        # the fast check of obs(): within [lo, hi] means finite and inside the bounds (NaN compares false)
        f32 = np.finfo(np.float32)
        self._lo = np.maximum(self.low, f32.min).astype(np.float64)
        self._hi = np.minimum(self.high, f32.max).astype(np.float64)

    def obs(self, value: Any, field: str) -> np.ndarray:
        """Check an observation: a list of ``obs_dim`` finite numbers inside the space's bounds.

        Returns:
            ``(obs_dim,)`` float32.

        Raises:
            RequestError: 422 naming ``field`` (and the index) for a wrong type or length, an entry that is not a
                number, NaN or an infinity, an integer beyond float64's range (:func:`_number`), a value outside
                the bounds (``obs[2] = 7.5 is outside the observation space's bounds [-1.0, 1.0]``), or a finite
                value beyond float32's range in an unbounded entry. The first bad entry is named: one that is not
                a number first, then one that is not finite in float32, then one outside the bounds.
        """
        if not isinstance(value, list):
            raise RequestError(422, f"{field} must be a list of {self.obs_dim} numbers, got {_json_type(value)}",
                               field)
        if len(value) != self.obs_dim:
            raise RequestError(422, f"{field} must have {self.obs_dim} entries, got {len(value)}", field)
        if _NUMBERS.issuperset(map(type, value)):  # the common case: numbers, all finite and in bounds
            try:
                arr = np.array(value, dtype=np.float64)  # exact for every float; no overflow warning to silence
            except OverflowError:  # an int beyond float64: the slow path names it
                arr = None
            if arr is not None and np.logical_and(arr >= self._lo, arr <= self._hi).all():
                try:
                    return np.array(value, dtype=np.float32)  # the conversion below (no overflow: in range)
                except (TypeError, ValueError, OverflowError):
                    pass
        arr = None
        if all(type(x) is float or type(x) is int for x in value):  # not bool, str (which NumPy would parse)
            try:
                with np.errstate(over="ignore"):  # a float beyond float32's range becomes inf: refused below
                    arr = np.array(value, dtype=np.float32)
            except (TypeError, ValueError, OverflowError):
                arr = None
        if arr is None or arr.shape != (self.obs_dim,):
            for i, x in enumerate(value):
                if isinstance(x, bool) or not isinstance(x, (int, float)):
                    raise RequestError(422, f"{field}[{i}] must be a number, got {_show(x)}", f"{field}[{i}]")
            arr = np.full(self.obs_dim, np.inf, dtype=np.float32)  # (an int too large for float32 stays inf)
            with np.errstate(over="ignore"):
                for i, x in enumerate(value):
                    try:
                        arr[i] = x
                    except OverflowError:
                        pass
        bad = ~np.isfinite(arr)
        if bad.any():  # NaN, an infinity, or a number float32 cannot hold (it became inf above): say which
            i = int(np.argmax(bad))
            x = _number(value[i], f"{field}[{i}]")  # refuses NaN, infinities and integers beyond float64
            if not float(self.low[i]) <= x <= float(self.high[i]):
                raise self._outside(value[i], field, i)
            raise RequestError(422, f"{field}[{i}] = {_show(value[i])} is beyond float32's range (±3.4e38), "
                                    "in which observations are stored", f"{field}[{i}]")
        if self.bounded:
            out = (arr < self.low) | (arr > self.high)
            if out.any():
                raise self._outside(value[int(np.argmax(out))], field, int(np.argmax(out)))
        return arr

    def _outside(self, x: Any, field: str, i: int) -> RequestError:
        return RequestError(422, f"{field}[{i}] = {_show(x)} is outside the observation space's bounds "
                                 f"[{self.low[i]}, {self.high[i]}]", f"{field}[{i}]")

    def action(self, logged) -> Any:
        """The agent-side form of a logged action: an int64 scalar (Discrete) or ``(D,)`` int64."""
        return np.int64(logged) if self.discrete else np.asarray(logged, dtype=np.int64)


_NUMBERS = frozenset((int, float))  # JSON numbers (bool, a subclass of int, is refused)


def _show(x: Any) -> str:
    """A client's value as messages quote it: :func:`lcpo.persistence.strict_json.show`, cut to 40 characters."""
    return show(x, 40)


def _number(v: Any, field: str, expect: str = "a number") -> float:
    """A JSON number as a finite float64: the one check every number of a request goes through (observation
    entries, ``reward``, ``info.gamma``), so each mistake reads the same wherever it is made.

    Args:
        v: the parsed value.
        field: its name in messages (``"obs[2]"``, ``"reward"``).
        expect: what the field takes, for the message on a value that is not a number (``"a number or null"``).

    Raises:
        RequestError: 422 naming ``field``: not a number (a bool, string, null, ...: ``reward must be a number,
            got '1'``); an integer beyond float64's range (JSON numbers may have any number of digits:
            ``reward = 1e+400 is beyond float64's range (±1.797e308)``); NaN or an infinity (``reward must be
            finite, got nan``).
    """
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise RequestError(422, f"{field} must be {expect}, got {_show(v)}", field)
    try:
        f = float(v)
    except OverflowError:
        f = None
    if f is not None and math.isfinite(f):
        return f
    if f is None or isinstance(v, BeyondFloat64):  # 10**400, or the literal 1e400 (json's inf)
        raise RequestError(422, f"{field} = {_show(v)} is beyond float64's range (±1.797e308)", field)
    raise RequestError(422, f"{field} must be finite, got {f!r}", field)


def _json_type(v: Any) -> str:
    """The JSON name of a parsed value's type (``null``, ``boolean``, ``number``, ``string``, ``array``,
    ``object``)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return {str: "string", list: "array"}.get(type(v), "object")


def _fields(body: Any, required: tuple, optional: tuple) -> dict:
    """``body`` if it is an object with every ``required`` key and no key beyond ``required + optional``.

    Raises:
        RequestError: 400 (field ``body``) for a body that is not an object; 422 for unknown keys (all listed,
            the first named as the field) or a missing required key.
    """
    if not isinstance(body, dict):
        raise RequestError(400, f"the request body must be a JSON object, got {_json_type(body)}", "body")
    unknown = sorted(set(body) - set(required) - set(optional))
    if unknown:
        names = ", ".join(_show(k) for k in unknown)
        raise RequestError(422, f"unknown field{'s' if len(unknown) > 1 else ''} {names}; allowed: "
                                f"{', '.join(required + optional)}", unknown[0])
    for k in required:
        if k not in body:
            raise RequestError(422, f"missing field {k!r}", k)
    return body


#: Steps one ``/v1/batch`` request may hold.
MAX_BATCH = 1024


def batch_steps(body: Any) -> list:
    """The ``steps`` of a ``/v1/batch`` body ``{"steps": [step, ...]}``; each is then checked alone
    (:func:`batch_entry`, then as a ``/v1/step`` body), so a bad one is refused without affecting the others.

    Raises:
        RequestError: 400 (field ``body``) when the body is not a JSON object; 422 when it has keys besides
            ``steps`` (``unknown field 'foo'; allowed: steps``, the field ``foo``; several are all listed, the
            first named), or ``steps`` is missing, not a list, empty or longer than :data:`MAX_BATCH`.
    """
    steps = _fields(body, ("steps",), ())["steps"]
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_BATCH:
        raise RequestError(422, f"steps must be a list of 1 to {MAX_BATCH} step objects, got "
                                f"{len(steps) if isinstance(steps, list) else _json_type(steps)}", "steps")
    return steps


def batch_entry(k: int, item: Any) -> dict:
    """Entry ``k`` of a batch's steps, if it is a JSON object (a step body, checked next as ``/v1/step``'s).

    Raises:
        RequestError: 422 naming ``steps[k]``: ``steps[3] must be a JSON object (a step body), got array``.
    """
    if not isinstance(item, dict):
        raise RequestError(422, f"steps[{k}] must be a JSON object (a step body), got {_json_type(item)}",
                           f"steps[{k}]")
    return item


def _bool(body: dict, k: str) -> bool:
    v = body.get(k, False)
    if not isinstance(v, bool):
        raise RequestError(422, f"{k} must be true or false, got {_show(v)}", k)
    return v


def _reward(v: Any, nullable: bool) -> float | None:
    if v is None and nullable:
        return None
    v = _number(v, "reward", "a number or null" if nullable else "a number")
    if not -F32_MAX <= v <= F32_MAX:  # the agents refuse it when they learn: the learner would fail on it for good
        raise RequestError(422, f"reward must be within the float32 range the agents train in (|reward| <= "
                                f"{F32_MAX:.4g}), got {v:.6g}", "reward")
    return v


def _info(v: Any) -> dict | None:
    if v is None:
        return None
    if not isinstance(v, dict):
        raise RequestError(422, f"info must be an object with keys among {list(INFO_KEYS)}, got {_show(v)}", "info")
    unknown = sorted(set(v) - set(INFO_KEYS))
    if unknown:
        raise RequestError(422, f"unknown field 'info.{unknown[0]}'; allowed: {', '.join(INFO_KEYS)}",
                           f"info.{unknown[0]}")
    out = {}
    if "gamma" in v:
        g = _number(v["gamma"], "info.gamma", "a number in [0, 1]")
        if not 0.0 <= g <= 1.0:
            raise RequestError(422, f"info.gamma must be a number in [0, 1], got {_show(v['gamma'])}",
                               "info.gamma")
        out["gamma"] = g
    if "forced" in v:
        if not isinstance(v["forced"], bool):
            raise RequestError(422, f"info.forced must be true or false, got {_show(v['forced'])}", "info.forced")
        out["forced"] = v["forced"]
    return out


def _floats(arr: np.ndarray) -> list:
    return arr.astype(np.float64).tolist()


def vec(v: Any) -> np.ndarray:
    """A record's observation as ``(obs_dim,)`` float32: the array itself (a record being built), a
    ``{"f32": base64}`` object (as :mod:`lcpo.serve.log` writes arrays: the float32 bytes, little-endian, exact)
    or a list of numbers."""
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, dict):
        import base64

        return np.frombuffer(base64.b64decode(v["f32"]), dtype="<f4").astype(np.float32)
    return np.asarray(v, dtype=np.float32)


def decision_id(n: int) -> str:
    """The public id of decision number ``n``."""
    return f"d{n}"


def parse_decision(v: Any) -> int:
    """Decision number of a public id ``"d<n>"``.

    Raises:
        RequestError: 422 for a malformed id.
    """
    if not isinstance(v, str) or not re.fullmatch(r"d(0|[1-9][0-9]{0,17})", v):
        raise RequestError(422, f"decision must be an id like 'd42' as answered by /v1/act, got {_show(v)}", "decision")
    return int(v[1:])


class ServerState:
    """Streams, outstanding decisions and counters: a deterministic function of the applied records.

    Args:
        spaces: the served spaces (for validation and the agent-side form of actions).
        limits: the client limits.

    Attributes:
        records: records applied. decisions: decisions made. transitions: transitions completed.
        streams: stream name -> deque of outstanding ``(n, obs (obs_dim,) float32, logged action)``,
            in the order streams were first seen. A stream whose every decision is observed is forgotten (a
            ``/v1/observe`` of its last outstanding decision ends it), so it no longer counts toward
            ``max_streams``; the same name may start again later.
    """

    def __init__(self, spaces: Spaces, limits: Limits | None = None):
        self.spaces = spaces
        self.limits = limits or Limits()
        self.records = 0
        self.decisions = 0
        self.transitions = 0
        self.streams: dict[str, deque] = {}
        self._owner: dict[int, str] = {}

    # -- validation (never changes the state) --------------------------------------------------------------------
    def _stream(self, body: dict) -> str:
        s = body["stream"]
        if not isinstance(s, str) or not STREAM_RE.match(s):
            raise RequestError(422, f"stream must be 1-128 characters of letters, digits and . _ : @ / -, got {_show(s)}",
                               "stream")
        return s

    def _can_decide(self, stream: str, dropping: int = 0) -> None:
        q = self.streams.get(stream)
        if q is None and len(self.streams) >= self.limits.max_streams:
            raise RequestError(429, f"stream limit reached ({self.limits.max_streams} streams); cannot open "
                                    f"stream {stream!r}", "stream")
        if q is not None and len(q) - dropping >= self.limits.max_outstanding:
            raise RequestError(429, f"stream {stream!r} has {len(q)} outstanding decisions (limit "
                                    f"{self.limits.max_outstanding}); observe them first", "stream")

    def check_step(self, body: Any) -> dict:
        """Validate a ``/v1/step`` body against the state; returns its record without the action.

        Raises:
            RequestError: naming the bad field (module docstring for the rules).
        """
        body = _fields(body, ("stream", "obs"), ("reward", "terminated", "truncated", "final_obs", "info"))
        stream = self._stream(body)
        obs = self.spaces.obs(body["obs"], "obs")
        reward = _reward(body.get("reward"), nullable=True)
        term, trunc = _bool(body, "terminated"), _bool(body, "truncated")
        info = _info(body.get("info"))
        q = self.streams.get(stream)
        rec = {"k": "step", "s": stream, "o": obs, "r": reward}
        if reward is None:
            # final_obs and info absent or null; the flags absent or false (_bool above refused a null flag)
            for k in ("terminated", "truncated", "final_obs", "info"):
                v = body.get(k)
                if v is not None and not (v is False and k in ("terminated", "truncated")):
                    raise RequestError(422, f"{k} belongs to the previous action's reward; with reward null "
                                            "(the stream's first step) leave it out", k)
            self._can_decide(stream, dropping=len(q) if q else 0)
            return rec
        if q is None:
            raise RequestError(404, f"unknown stream {stream!r}: its first step has reward null", "stream")
        if len(q) != 1:
            raise RequestError(409, f"stream {stream!r} has {len(q)} outstanding decisions; a step with a reward "
                                    "needs exactly one (use /v1/observe, or reward null to start afresh)", "reward")
        ended = term or trunc
        final = body.get("final_obs")
        if ended and final is None:
            raise RequestError(422, "final_obs (the observation the previous action reached) is required when "
                                    "terminated or truncated is true", "final_obs")
        if not ended and final is not None:
            raise RequestError(422, "final_obs is only for a step whose previous action ended the episode "
                                    "(terminated or truncated true)", "final_obs")
        rec.update(te=term, tr=trunc, f=None if final is None else self.spaces.obs(final, "final_obs"),
                   i=info)
        return rec

    def check_act(self, body: Any) -> dict:
        """Validate a ``/v1/act`` body; returns its record without the action.

        Raises:
            RequestError: naming the bad field.
        """
        body = _fields(body, ("stream", "obs"), ())
        stream = self._stream(body)
        obs = self.spaces.obs(body["obs"], "obs")
        self._can_decide(stream)
        return {"k": "act", "s": stream, "o": obs}

    def check_observe(self, body: Any) -> dict:
        """Validate a ``/v1/observe`` body; returns its (complete) record.

        Raises:
            RequestError: 404 for an unknown decision, 409 for a duplicate observe or one out of the stream's
                order, 422 for a bad field.
        """
        body = _fields(body, ("decision", "reward", "next_obs"), ("terminated", "truncated", "info"))
        n = parse_decision(body["decision"])
        stream = self._owner.get(n)
        if stream is None:
            if n < self.decisions:
                raise RequestError(409, f"decision {body['decision']!r} was already observed (or dropped when its "
                                        "stream started afresh): a duplicate observe", "decision")
            raise RequestError(404, f"unknown decision {body['decision']!r}", "decision")
        oldest = self.streams[stream][0][0]
        if oldest != n:
            raise RequestError(409, f"decision {body['decision']!r} of stream {stream!r} is observed out of order: "
                                    f"observe {decision_id(oldest)!r} first", "decision")
        reward = _reward(body["reward"], nullable=False)
        next_obs = self.spaces.obs(body["next_obs"], "next_obs")
        return {"k": "obs", "d": n, "r": reward, "n": next_obs, "te": _bool(body, "terminated"),
                "tr": _bool(body, "truncated"), "i": _info(body.get("info"))}

    # -- the state machine --------------------------------------------------------------------------------------
    def apply(self, rec: dict, transitions: bool = True) -> tuple[str, Transition] | None:
        """Apply one record; returns ``(stream, transition)`` when it completes one (with ``transitions``; the
        serving state, which only validates against the streams, passes False and gets None).

        Records: ``{"k": "step", "s", "o", "r", ["te", "tr", "f", "i"], "a", "v"}``,
        ``{"k": "act", "s", "o", "a", "v"}``, ``{"k": "obs", "d", "r", "n", "te", "tr", "i"}`` (``a`` the
        logged action, ``v`` the policy version it came from).

        Raises:
            ValueError: for a record that does not fit the state (a corrupt or foreign log).
        """
        kind = rec.get("k")
        out, done = None, False
        if kind == "obs":
            n = int(rec["d"])
            stream = self._owner.pop(n, None)
            if stream is None or self.streams[stream][0][0] != n:
                raise ValueError(f"log record {self.records} observes decision {n}, which is not the oldest "
                                 "outstanding decision of its stream")
            q = self.streams[stream]
            _, obs, action = q.popleft()
            if not q:  # every decision of the stream observed: it is forgotten (and may start again at any time)
                del self.streams[stream]
            done = True
            if transitions:
                out = (stream, self._transition(obs, action, rec, vec(rec["n"])))
        elif kind in ("step", "act"):
            stream = rec["s"]
            q = self.streams.get(stream)
            if q is None:
                q = self.streams[stream] = deque()
            if kind == "step":
                if rec["r"] is None:
                    for n, _, _ in q:
                        del self._owner[n]
                    q.clear()
                else:
                    if len(q) != 1:
                        raise ValueError(f"log record {self.records} is a step on stream {stream!r} with "
                                         f"{len(q)} outstanding decisions")
                    n, obs, action = q.popleft()
                    del self._owner[n]
                    done = True
                    if transitions:
                        nxt = rec["f"] if rec.get("f") is not None else rec["o"]
                        out = (stream, self._transition(obs, action, rec, vec(nxt)))
            q.append((self.decisions, vec(rec["o"]), rec["a"]))
            self._owner[self.decisions] = stream
            self.decisions += 1
        else:
            raise ValueError(f"log record {self.records} has an unknown kind {kind!r}")
        self.records += 1
        if done:
            self.transitions += 1
        return out

    def peek(self, rec: dict) -> tuple[str, Transition] | None:
        """The ``(stream, transition)`` a checked step record (without its action yet) would complete; pure."""
        if rec["k"] != "step" or rec["r"] is None:
            return None
        _, obs, action = self.streams[rec["s"]][0]
        nxt = rec["f"] if rec.get("f") is not None else rec["o"]
        return rec["s"], self._transition(obs, action, rec, vec(nxt))

    def _transition(self, obs, action, rec: dict, next_obs) -> Transition:
        return Transition(obs, self.spaces.action(action), float(rec["r"]), next_obs, bool(rec.get("te", False)),
                          bool(rec.get("tr", False)), rec.get("i") or None)

    @property
    def outstanding(self) -> int:
        """Outstanding decisions over all streams."""
        return len(self._owner)

    # -- persistence -----------------------------------------------------------------------------------------------
    def to_json(self) -> dict:
        """The state as JSON values (float32 observations written as exact float64 values)."""
        return {"records": self.records, "decisions": self.decisions, "transitions": self.transitions,
                "streams": [[s, [[n, _floats(o), a] for n, o, a in q]] for s, q in self.streams.items()]}

    def load_json(self, doc: dict) -> None:
        """Restore :meth:`to_json` output."""
        self.records, self.decisions = int(doc["records"]), int(doc["decisions"])
        self.transitions = int(doc["transitions"])
        self.streams, self._owner = {}, {}
        for s, items in doc["streams"]:
            if not items:  # a stream with nothing outstanding, as states written before streams were forgotten hold
                continue
            q = self.streams[s] = deque()
            for n, o, a in items:
                q.append((int(n), np.asarray(o, dtype=np.float32), a))
                self._owner[int(n)] = s
