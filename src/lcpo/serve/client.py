"""A small Python client of ``lcpo serve`` (httpx; one connection kept alive).

Example:
    >>> from lcpo.serve.client import ServeClient                          # doctest: +SKIP
    >>> c = ServeClient("http://127.0.0.1:8765")                          # doctest: +SKIP
    >>> d = c.step("proxy-1", obs)                # first step of a stream: no reward yet   # doctest: +SKIP
    >>> d = c.step("proxy-1", obs2, reward=-0.3)  # the reward of d["action"]              # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["ServeClient", "ServeError"]


class ServeError(RuntimeError):
    """A refused request: ``status`` (HTTP), ``field`` (the bad field, or None) and the server's message."""

    def __init__(self, status: int, message: str, field: str | None):
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.field = status, field


def _floats(x) -> list:
    import numpy as np

    return np.asarray(x, dtype=np.float64).reshape(-1).tolist()


def _step_body(stream: str, obs: Sequence[float], reward: float | None = None, terminated: bool = False,
               truncated: bool = False, final_obs: Sequence[float] | None = None, info: dict | None = None) -> dict:
    body: dict[str, Any] = {"stream": stream, "obs": _floats(obs)}
    if reward is not None:
        body.update(reward=float(reward), terminated=bool(terminated), truncated=bool(truncated))
        if final_obs is not None:
            body["final_obs"] = _floats(final_obs)
        if info:
            body["info"] = info
    return body


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
        """
        return self._post("/v1/step", _step_body(stream, obs, reward, terminated, truncated, final_obs, info))

    def batch(self, steps: Sequence[dict]) -> list[dict]:
        """``POST /v1/batch``: many steps in one request, applied in order, each exactly as :meth:`step`.

        Args:
            steps: 1 to 1,024 dicts of :meth:`step`'s arguments (``stream``, ``obs``, and optionally ``reward``,
                ``terminated``, ``truncated``, ``final_obs``, ``info``).

        Returns:
            Per step, in order: its answer (as :meth:`step`'s) or, for a refused step (which changed nothing and
            did not affect the others), ``{"error", "field", "status"}``.
        """
        return self._post("/v1/batch", {"steps": [_step_body(**s) for s in steps]})["results"]

    def act(self, stream: str, obs: Sequence[float]) -> dict:
        """``POST /v1/act``: a decision whose outcome comes later; returns as :meth:`step`."""
        return self._post("/v1/act", {"stream": stream, "obs": _floats(obs)})

    def observe(self, decision: str, reward: float, next_obs: Sequence[float], terminated: bool = False,
                truncated: bool = False, info: dict | None = None) -> dict:
        """``POST /v1/observe``: the outcome of ``decision`` (a stream's decisions in the order they were made)."""
        body: dict[str, Any] = {"decision": decision, "reward": float(reward), "next_obs": _floats(next_obs),
                                "terminated": bool(terminated), "truncated": bool(truncated)}
        if info:
            body["info"] = info
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
