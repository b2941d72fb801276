"""What a served system looks like: its observation and action spaces and its context entries.

A server takes them from a Gymnasium environment id (``--env``, built with :func:`lcpo.envs.registration.make_env`
and never stepped) or, for a system that has no Gymnasium environment, from a small JSON spec file (``--spec``)::

    {
      "observation": {"size": 4, "low": -10.0, "high": [10, 10, 10, 10]},
      "action": {"discrete": 3},                 (or {"multi_discrete": [15, 15]}: equal bins per dimension)
      "context": {"indices": [2, 3], "names": ["load", "size"], "units": "normalized"},   (optional)
      "continuing": true                         (optional, default true)
    }

``low``/``high`` are a number for every entry, a list of ``size`` numbers (``null`` entries unbounded), or
``null`` (unbounded). Bounds are kept in float32: a finite bound beyond its range (``1e39``) is refused, not
made infinite; ``-Infinity``/``Infinity`` (as Python's ``json`` writes them) mean unbounded, as ``null`` does.
The file is data (JSON), never code.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from lcpo.persistence.strict_json import show

__all__ = ["SpecError", "load_spec", "spec_env"]


class SpecError(ValueError):
    """A spec file is missing, not JSON, repeats a key, or holds a bad field; the message names the file and the
    field."""


def _bound(value: Any, size: int, field: str, default: float):
    """``observation.low``/``high`` as ``(size,)`` float32; ``default`` (``-inf``/``inf``) where unbounded.

    Raises:
        SpecError: not a number, a list of ``size`` numbers or null; NaN; a finite value beyond float32's range,
            in which the space keeps its bounds (it would silently become an infinite bound); an infinity on the
            wrong side (a lower bound of ``+inf``, an upper one of ``-inf``: no observation would fit). Names
            the entry of a list (``observation.high[0] = 1e+39 is beyond float32's range (±3.4e38) ...``).
    """
    import numpy as np

    if value is None:
        return np.full(size, default, dtype=np.float32)
    if isinstance(value, bool) or not isinstance(value, (int, float, list)):
        raise SpecError(f"{field} must be a number, a list of {size} numbers or null, got {show(value)}")
    arr = value if isinstance(value, list) else [value] * size
    if len(arr) != size or any(x is not None and (isinstance(x, bool) or not isinstance(x, (int, float)))
                               for x in arr):
        raise SpecError(f"{field} must be a number, a list of {size} numbers (null: unbounded) or null, "
                        f"got {show(value)}")
    out = np.full(size, default, dtype=np.float32)
    for i, x in enumerate(arr):
        if x is None:
            continue
        where = field if not isinstance(value, list) else f"{field}[{i}]"
        try:
            f = float(x)
        except OverflowError:  # an integer beyond float64
            f = None
        if f is not None and math.isnan(f):
            raise SpecError(f"{where} must be a number or null (unbounded), got nan")
        if f is not None and math.isinf(f):
            if f == -default:
                raise SpecError(f"{where} = {f!r} leaves no observation inside the bounds; null means unbounded")
            continue  # ±Infinity: unbounded, as null
        with np.errstate(over="ignore"):
            out[i] = np.inf if f is None else f
        if math.isinf(out[i]):
            raise SpecError(f"{where} = {show(x)} is beyond float32's range (±3.4e38), in which the space keeps "
                            "its bounds; null (or ±Infinity) means unbounded")
    return out


def load_spec(path: str | Path) -> dict:
    """Read and check a spec file (module docstring); returns the parsed document.

    Raises:
        SpecError: naming the file and the bad field (or the key an object repeats).
    """
    path = Path(path)
    from lcpo.serve.protocol import DuplicateKeyError, unique_object

    def finite_float(text: str) -> float:  # 1e400 would read as Infinity, i.e. unbounded, without a word
        value = float(text)
        if math.isinf(value):
            raise SpecError(f"spec file {path}: the number {text} is beyond float64's range (±1.797e308); write null "
                            "(or ±Infinity) for an unbounded entry")
        return value

    try:
        doc = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=unique_object, parse_float=finite_float)
    except FileNotFoundError:
        raise SpecError(f"spec file {path} does not exist") from None
    except DuplicateKeyError as exc:  # json alone would keep the last value silently
        raise SpecError(f"spec file {path} repeats a key in one object ({exc}); each key may appear once") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"spec file {path} is not JSON ({exc})") from None
    try:
        spec_env(doc)
    except SpecError as exc:
        raise SpecError(f"spec file {path}: {exc}") from None
    return doc


def spec_env(doc: dict):
    """A ``gymnasium.Env`` with the spaces and context of a spec document (module docstring).

    Args:
        doc: the parsed spec.

    Returns:
        An environment whose ``reset``/``step`` raise ``RuntimeError`` (the served system steps itself).

    Raises:
        SpecError: naming the bad field.
    """
    import gymnasium as gym
    import numpy as np

    from lcpo.envs.context import ContextSpec

    if not isinstance(doc, dict):
        raise SpecError(f"a spec is a JSON object, got {show(doc)}")
    unknown = sorted(set(doc) - {"observation", "action", "context", "continuing"})
    if unknown:
        raise SpecError(f"unknown field(s) {unknown}; allowed: observation, action, context, continuing")
    obs = doc.get("observation")
    if not isinstance(obs, dict) or "size" not in obs:
        raise SpecError("observation must be an object with a size, e.g. {\"size\": 4}")
    size = obs["size"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise SpecError(f"observation.size must be a positive integer, got {show(size)}")
    low = _bound(obs.get("low"), size, "observation.low", -np.inf)
    high = _bound(obs.get("high"), size, "observation.high", np.inf)
    if np.any(low > high):
        raise SpecError("observation.low exceeds observation.high at index "
                        f"{int(np.argmax(low > high))}")
    act = doc.get("action")
    if not isinstance(act, dict) or len(act) != 1 or next(iter(act)) not in ("discrete", "multi_discrete"):
        raise SpecError(f"action must be {{\"discrete\": n}} or {{\"multi_discrete\": [n, ...]}}, got {show(act)}")
    if "discrete" in act:
        n = act["discrete"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise SpecError(f"action.discrete must be an integer >= 2, got {show(n)}")
        action_space = gym.spaces.Discrete(n)
    else:
        nvec = act["multi_discrete"]
        if (not isinstance(nvec, list) or not nvec
                or any(isinstance(x, bool) or not isinstance(x, int) or x < 2 for x in nvec)):
            raise SpecError(f"action.multi_discrete must be a list of integers >= 2, got {show(nvec)}")
        if len(set(nvec)) != 1:
            raise SpecError(f"action.multi_discrete needs equal bins per dimension, got {show(nvec)}")
        action_space = gym.spaces.MultiDiscrete(nvec)
    context = None
    if doc.get("context") is not None:
        c = doc["context"]
        if not isinstance(c, dict) or not isinstance(c.get("indices"), list) or not c["indices"]:
            raise SpecError("context must be an object with a non-empty list of indices")
        idx = c["indices"]
        if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < size for i in idx):
            raise SpecError(f"context.indices must be observation indices in [0, {size}), got {show(idx)}")
        names = c.get("names", [f"obs[{i}]" for i in idx])
        if not isinstance(names, list) or len(names) != len(idx) or not all(isinstance(x, str) for x in names):
            raise SpecError(f"context.names must be {len(idx)} strings, got {show(names)}")
        unknown = sorted(set(c) - {"indices", "names", "units"})
        if unknown:
            raise SpecError(f"unknown context field(s) {unknown}; allowed: indices, names, units")
        try:
            context = ContextSpec(tuple(idx), tuple(names), units=str(c.get("units", "")))
        except ValueError as exc:
            raise SpecError(f"context: {exc}") from None
    continuing = doc.get("continuing", True)
    if not isinstance(continuing, bool):
        raise SpecError(f"continuing must be true or false, got {show(continuing)}")

    class _Spec(gym.Env):
        metadata = {"render_modes": [], "continuing": continuing}
        from_spec_document = True  # for messages: its context comes from the document's "context" field

        def __init__(self):
            self.observation_space = gym.spaces.Box(low, high, dtype=np.float32)
            self.action_space = action_space
            self.context_spec = context

        def reset(self, *, seed=None, options=None):
            raise RuntimeError("a spec environment is a placeholder: the served system steps itself")

        def step(self, action):
            raise RuntimeError("a spec environment is a placeholder: the served system steps itself")

    _Spec.__name__ = _Spec.__qualname__ = "SpecEnv"
    return _Spec()
