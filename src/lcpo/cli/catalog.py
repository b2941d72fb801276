"""What the library offers, by name, without importing it: environments, context traces, straggler workloads.

Standard library only, so ``lcpo --help``, ``lcpo envs list`` and ``lcpo traces list`` answer at once (no NumPy,
PyTorch, SciPy, pandas or MuJoCo import). Each table mirrors a declaration that lives with the code it
describes, and ``tests/test_catalog.py`` checks them entry by entry against the real thing (making every
environment, reading every registry), so a change there that is not made here fails the tests:

* :data:`ENVS`: observation shape, action space, context entries (``env.unwrapped.context_spec``) and the
  kind of task the environment declares (``metadata["continuing"]``, :mod:`lcpo.envs.task`) with its default
  arguments; the ids are those of :data:`lcpo.envs.registration.ENV_IDS`.
* :data:`TRACE_NAMES`, :data:`DEFAULT_TRACE`: the registered context traces (:mod:`lcpo.contexts.canonical`
  builds them and imports these names from here).
* :data:`WORKLOADS`: the straggler workload presets (:data:`lcpo.envs.straggler.workloads.WORKLOAD_NAMES`).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DEFAULT_TRACE", "ENVS", "EnvInfo", "TRACE_NAMES", "WORKLOADS"]


class EnvInfo(NamedTuple):
    """Static facts of a registered environment made with its default arguments.

    Attributes:
        summary: one line: what the task is.
        observation: observation shape.
        action: the action space as ``str(env.action_space)`` prints it.
        context: names of the context entries of the observation (``context_spec.names``; empty: none).
        continuing: the declared kind (``metadata["continuing"]``): True for a continuing task.
    """

    summary: str
    observation: tuple[int, ...]
    action: str
    context: tuple[str, ...]
    continuing: bool


_WIND = ("wind_x[t]", "wind_x[t-1]", "wind_x[t-2]", "wind_y[t]", "wind_y[t-1]", "wind_y[t-2]")

#: Registered environment id -> :class:`EnvInfo` (default arguments).
ENVS: dict[str, EnvInfo] = {
    "lcpo/WindyPendulum-v0": EnvInfo(
        "Pendulum-v1 swing-up under a wind torque from the trace (200-step episodes)",
        (9,), "MultiDiscrete([15])", _WIND, False),
    "lcpo/WindyInvertedPendulum-v0": EnvInfo(
        "MuJoCo InvertedPendulum-v4 plus a wind hinge motor (200-step episodes, or until the pole falls)",
        (10,), "MultiDiscrete([15])", _WIND, False),
    "lcpo/WindyInvertedDoublePendulum-v0": EnvInfo(
        "MuJoCo InvertedDoublePendulum-v4 plus two wind hinge motors (200-step episodes, or until it falls)",
        (17,), "MultiDiscrete([15])", _WIND, False),
    "lcpo/WindyHopper-v0": EnvInfo(
        "MuJoCo Hopper-v4 under wind (200-step episodes, or until it falls)",
        (17,), "MultiDiscrete([15 15 15])", _WIND, False),
    "lcpo/WindyReacher-v0": EnvInfo(
        "MuJoCo Reacher-v4 under wind (50-step episodes)",
        (17,), "MultiDiscrete([15 15])", _WIND, False),
    "lcpo/TrapGrid-v0": EnvInfo(
        "the trap grid world of paper Figure 1 (20-step episodes; the trap switches with the schedule)",
        (10,), "Discrete(4)", ("trap",), False),
    "lcpo/StragglerMitigation-v0": EnvInfo(
        "request hedging on 10 servers: pick a timeout every 500 ms of a workload (paper Section 6)",
        (32,), "Discrete(9)", ("rate_ema_0.99", "size_ema_0.99"), True),
    "lcpo/ContinuingChain-v0": EnvInfo(
        "a 5-state cycle with constant reward and a known value function (tests and docs)",
        (5,), "Discrete(2)", (), True),
}

DEFAULT_TRACE = "ndbc-46002"
"""The trace used when none is named."""

TRACE_NAMES: dict[str, str] = {
    "wind-1": "paper trace 1: slow Ornstein-Uhlenbeck drift, x and y independent, within [-2.5, 1]",
    "wind-2": "paper trace 2: wider Ornstein-Uhlenbeck drift spanning [-4, 4]",
    "wind-3": "paper trace 3: six constant levels (changes at 1.1, 2.2, 3.9, 5.4, 6.9 of 8) plus noise",
    "wind-4": "paper trace 4: calm for the first 4.5/8, then sinusoidal bursts of amplitude 2.5-5 (clipped to 4)",
    "zero": "all-zero wind, two axes (stationary control)",
    "ndbc-46002": "real wind, NOAA buoy 46002 Jan-Jul 2016, (u, v) scaled into [-4, 4], 30 s per step",
}
"""Registered trace names and a one-line description of each."""

#: Straggler workload preset name (``--trace`` of ``lcpo/StragglerMitigation-v0``) -> one-line description.
WORKLOADS: dict[str, str] = {
    "azure-llm": "real: Azure LLM inference trace 2023 (code + conversation), ~58 min; the default",
    "synthetic-ramp": "paper trace 1 shape: rate ramps 8 -> 38 req/s, holds, falls to 10; ~80 ms sizes",
    "synthetic-noisy": "paper trace 2 shape: noisy 30-200 req/s, ~28 ms sizes",
    "constant-60x28": "stationary: Poisson 60 req/s, Pareto(2) sizes of mean 28 ms",
    "constant-20x80": "stationary: Poisson 20 req/s, Pareto(2) sizes of mean 80 ms",
}
