"""A small Python client of ``lcpo serve`` (httpx; one connection kept alive).

Example:
    >>> from lcpo.serve.client import ServeClient                          # doctest: +SKIP
    >>> c = ServeClient("http://127.0.0.1:8765")                          # doctest: +SKIP
    >>> d = c.step("proxy-1", obs)                # first step of a stream: no reward yet   # doctest: +SKIP
    >>> d = c.step("proxy-1", obs2, reward=-0.3)  # the reward of d["action"]              # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Sequence

# the server's own quoting, so a local refusal reads as the server's (protocol imports no torch)
from lcpo.serve.protocol import _show

__all__ = ["ServeClient", "ServeError"]


class ServeError(RuntimeError):
    """A refused request: ``status`` (HTTP), ``field`` (the bad field, or None) and ``message`` (the server's).

    ``local`` is True when the client refused it before sending: a value JSON cannot carry (NaN, an infinity) or
    that is not a number, with the status and wording the server gives the same mistake (422, ``obs[2] must be
    finite, got nan``)."""

    def __init__(self, status: int, message: str, field: str | None, local: bool = False):
        super().__init__(f"HTTP {status}: {message}" + (" (refused by the client, not sent)" if local else ""))
        self.status, self.field, self.local, self.message = status, field, local, message


def _is_number(v) -> bool:
    """Whether ``v`` is a number the server takes: an int or float (NumPy's too, or a 0-d array of one); never a
    boolean, a string or bytes (which NumPy and ``float`` would turn into numbers the server refuses)."""
    import numpy as np

    if isinstance(v, np.ndarray):
        return v.ndim == 0 and v.dtype.kind in "iuf"
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _floats(x, field: str) -> list:
    """``x`` (a 1-D sequence or array) as a list of finite floats for JSON; never reshaped.

    Raises:
        ServeError: (local, 422) naming ``field``: not numbers (an entry that is a boolean, a string or bytes
            included: the server refuses one, NumPy would send it as a float; ``obs[1] must be a number, got
            '1'``), not 1-D, the first entry that is an integer beyond
            float64's range (``obs[2] = 1e+400 is beyond float64's range (±1.797e308)``, as the server words it) or
            the first entry that is not finite.
    """
    import numpy as np

    if isinstance(x, np.ndarray) and x.dtype.kind not in "iuf":
        what = "booleans" if x.dtype == np.bool_ else f"dtype {x.dtype}"
        raise ServeError(422, f"{field} must be a list of numbers, got an array of {what}", field, local=True)
    if isinstance(x, (str, bytes)):
        raise ServeError(422, f"{field} must be a list of numbers, got {_show(x)}", field, local=True)
    if not isinstance(x, np.ndarray):
        for i, v in enumerate(x if isinstance(x, (list, tuple)) else ()):
            nested = isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.ndim > 0)  # the shape check
            if not nested and not _is_number(v):
                raise ServeError(422, f"{field}[{i}] must be a number, got {_show(v)}", f"{field}[{i}]", local=True)
    try:
        arr = np.asarray(x, dtype=np.float64)
    except OverflowError as exc:  # an integer beyond float64: name the entry
        for i, v in enumerate(x):
            if isinstance(v, int) and not isinstance(v, bool):
                try:
                    float(v)
                except OverflowError:
                    raise ServeError(422, f"{field}[{i}] = {_show(v)} is beyond float64's range (±1.797e308)",
                                     f"{field}[{i}]", local=True) from None
        raise ServeError(422, f"{field} must be a list of numbers, got {_show(x)} ({exc})", field, local=True) from None
    except (TypeError, ValueError) as exc:
        raise ServeError(422, f"{field} must be a list of numbers, got {_show(x)} ({exc})", field, local=True) from None
    if arr.ndim != 1:  # never flattened: a (1, n) batch of one passed by mistake would be learned from as one step
        raise ServeError(422, f"{field} must be a flat list of numbers (1-D), got an array of shape {arr.shape}",
                         field, local=True)
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.argmax(bad))
        raise ServeError(422, f"{field}[{i}] must be finite, got {float(arr[i])!r}", f"{field}[{i}]", local=True)
    return arr.tolist()


def _info(info) -> dict:
    """``info`` with every float entry checked finite (JSON cannot carry NaN or an infinity; the server's own
    checks of the keys and ranges apply after); other values are sent as given.

    Raises:
        ServeError: (local, 422) naming ``info.KEY`` for a NaN, an infinity or an integer beyond float64
            (:func:`_number`).
    """
    if not isinstance(info, dict):
        return info  # the server refuses it, naming the field
    for key, v in info.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            _number(v, f"info.{key}")  # checked only: the value is sent as given
    return info


def _number(v, field: str, expect: str = "a number") -> float:
    """``v`` as a finite float.

    Raises:
        ServeError: (local, 422) naming ``field``, in the server's words: not a number (a boolean, a string or
            bytes too: ``reward must be a number or null, got '1'``), an integer beyond
            float64's range (``reward = 1e+400 is beyond float64's range (±1.797e308)``), NaN or an infinity.
    """
    import math

    if not _is_number(v):  # a boolean, a string, bytes: the server refuses it; float() would make it a number
        raise ServeError(422, f"{field} must be {expect}, got {_show(v)}", field, local=True)
    try:
        f = float(v)
    except OverflowError:
        raise ServeError(422, f"{field} = {_show(v)} is beyond float64's range (±1.797e308)", field,
                         local=True) from None
    except (TypeError, ValueError):
        raise ServeError(422, f"{field} must be {expect}, got {_show(v)}", field, local=True) from None
    if not math.isfinite(f):
        raise ServeError(422, f"{field} must be finite, got {f!r}", field, local=True)
    return f


_STEP_FIELDS = ("stream", "obs", "reward", "terminated", "truncated", "final_obs", "info")


def _step_body(stream: str, obs: Sequence[float], reward: float | None = None, terminated: bool = False,
               truncated: bool = False, final_obs: Sequence[float] | None = None, info: dict | None = None) -> dict:
    """The JSON body of one step. Every argument given is sent, so the server refuses what does not belong (an
    end of episode or ``final_obs`` without a reward) instead of the client dropping it.

    Raises:
        ServeError: (local, 422) for a value that is not a finite number.
    """
    body: dict[str, Any] = {"stream": stream, "obs": _floats(obs, "obs")}
    if reward is not None:
        body["reward"] = _number(reward, "reward", "a number or null")  # the server's words
    if reward is not None or terminated:
        body["terminated"] = bool(terminated)
    if reward is not None or truncated:
        body["truncated"] = bool(truncated)
    if final_obs is not None:
        body["final_obs"] = _floats(final_obs, "final_obs")
    if info:
        body["info"] = _info(info)
    return body


def _batch_item(item) -> dict:
    """One ``/v1/batch`` entry's body. Raises: ServeError (local, 422) for a malformed entry."""
    if not isinstance(item, dict):
        raise ServeError(422, f"a batch entry must be a dict of step()'s arguments, got {_show(item)}", None, local=True)
    unknown = sorted(set(item) - set(_STEP_FIELDS))
    if unknown:
        raise ServeError(422, f"unknown field {unknown[0]!r}; allowed: {', '.join(_STEP_FIELDS)}", unknown[0],
                         local=True)
    for k in ("stream", "obs"):
        if k not in item:
            raise ServeError(422, f"missing field {k!r}", k, local=True)
    return _step_body(**item)


class ServeClient:
    """Client of one server.

    Args:
        url: base URL, e.g. ``"http://127.0.0.1:8765"``.
        token: bearer token (for a server started with ``--token-file``), or None.
        timeout: seconds per request.

    Raises (every method):
        ServeError: a refused request (4xx/5xx), naming the field; ``httpx.TransportError`` when the server
            cannot be reached.
    """

    def __init__(self, url: str, token: str | None = None, timeout: float = 10.0):
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)

    def _post(self, path: str, body: dict) -> dict:
        r = self._http.post(path, json=body)
        if r.status_code != 200:
            try:
                doc = r.json()
            except ValueError:
                doc = {"error": r.text, "field": None}
            raise ServeError(r.status_code, doc.get("error", ""), doc.get("field"))
        return r.json()

    def step(self, stream: str, obs: Sequence[float], reward: float | None = None, terminated: bool = False,
             truncated: bool = False, final_obs: Sequence[float] | None = None, info: dict | None = None) -> dict:
        """``POST /v1/step``: the previous action's outcome and a new decision.

        Args:
            stream: the stream's name.
            obs: ``(obs_dim,)`` the observation to act on.
            reward: the previous action's reward; None for the stream's first step (or to start it afresh).
            terminated, truncated: whether the previous action ended the episode.
            final_obs: the observation the previous action reached, when it ended the episode (``obs`` is then the
                next episode's first observation).
            info: ``{"gamma": float, "forced": bool}`` of the previous transition, or None.

        Returns:
            ``{"action": int | list[int], "decision": str, "policy_version": int}``.

        Raises:
            ServeError: the server's refusal (an end of episode, ``final_obs`` or ``info`` with ``reward=None``
                included: they belong to a previous action's reward), or the client's (``local``) for a value that
                is not a finite number, which JSON cannot carry; nothing is sent then.
        """
        return self._post("/v1/step", _step_body(stream, obs, reward, terminated, truncated, final_obs, info))

    def batch(self, steps: Sequence[dict]) -> list[dict]:
        """``POST /v1/batch``: many steps in one request, applied in order, each exactly as :meth:`step`.

        Args:
            steps: 1 to 1,024 dicts of :meth:`step`'s arguments (``stream``, ``obs``, and optionally ``reward``,
                ``terminated``, ``truncated``, ``final_obs``, ``info``).

        Returns:
            Per step, in order: its answer (as :meth:`step`'s) or, for a refused step (which changed nothing and
            did not affect the others), ``{"error", "field", "status"}``. A step the client refuses (a value that
            is not a finite number, an unknown or missing argument) is answered the same way, with
            ``"local": True``, and is not sent; the others are, in order (a refused step changes nothing, so
            leaving it out is the same as the server refusing it).

        Raises:
            ServeError: for a refused request as a whole (an empty or oversized batch, a bad token).
        """
        results: list[dict | None] = []
        bodies = []
        for i, item in enumerate(steps):
            try:
                bodies.append(_batch_item(item))
                results.append(None)
            except ServeError as exc:  # named as the server names a refused entry: steps[i].field
                field = f"steps[{i}]" + (f".{exc.field}" if exc.field else "")
                results.append({"error": exc.message, "field": field, "status": exc.status, "local": True})
        if not results:
            return self._post("/v1/batch", {"steps": []})["results"]  # the server's own answer to an empty batch
        answers = iter(self._post("/v1/batch", {"steps": bodies})["results"] if bodies else ())
        out, sent = [], 0
        for i, r in enumerate(results):
            if r is None:
                r = next(answers)
                field = r.get("field") if "error" in r else None
                if field and i != sent:  # the server counts the steps it was sent: name the caller's index
                    r = {**r, "field": field.replace(f"steps[{sent}]", f"steps[{i}]", 1)}
                sent += 1
            out.append(r)
        return out

    def act(self, stream: str, obs: Sequence[float]) -> dict:
        """``POST /v1/act``: a decision whose outcome comes later; returns as :meth:`step`."""
        return self._post("/v1/act", {"stream": stream, "obs": _floats(obs, "obs")})

    def observe(self, decision: str, reward: float, next_obs: Sequence[float], terminated: bool = False,
                truncated: bool = False, info: dict | None = None) -> dict:
        """``POST /v1/observe``: the outcome of ``decision`` (a stream's decisions in the order they were made)."""
        body: dict[str, Any] = {"decision": decision, "reward": _number(reward, "reward"),
                                "next_obs": _floats(next_obs, "next_obs"),
                                "terminated": bool(terminated), "truncated": bool(truncated)}
        if info:
            body["info"] = _info(info)
        return self._post("/v1/observe", body)

    def status(self) -> dict:
        """``GET /v1/status``."""
        r = self._http.get("/v1/status")
        if r.status_code != 200:
            try:
                doc = r.json()
            except ValueError:
                doc = {"error": r.text, "field": None}
            raise ServeError(r.status_code, doc.get("error", ""), doc.get("field"))
        return r.json()

    def close(self) -> None:
        """Close the connection."""
        self._http.close()

    def __enter__(self) -> "ServeClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
