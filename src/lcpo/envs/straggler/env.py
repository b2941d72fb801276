"""``lcpo/StragglerMitigation-v0``: choose a request-hedging timeout every 500 ms (paper Section 6, spec
``shared/specs/straggler.md``).

A continuing task (it never terminates or truncates by itself): the agent acts once per window of
``window_ms`` (500 ms); the action picks the timeout for requests arriving in that window out of
:data:`~lcpo.envs.straggler.sim.TIMEOUTS_MS` (3, 10, 30, 60, 100, 300, 600, 1000 ms, never). A step processes
events up to the window end and, if no request completed yet, continues until one does.

Observation (``2 N + 12`` float32 values, 32 for ``N = 10``), see :data:`OBS_NAMES`:

==========  ====================================================================================
index        meaning
==========  ====================================================================================
0..N-1       queue length of each server at step end (copies, including the one in service)
N..2N-1      time-averaged queue length of each server during the step
2N           arrival rate over the last 4 steps / ``rate_scale``
2N+1         mean inflated service time of requests arriving in the last 4 steps / ``size_scale``
2N+2, 2N+3   largest per-step arrival rate / mean service time among those 4 steps (normalized)
2N+4         offered load estimate: sum of service times / sum of inter-arrivals / N (last 4 steps)
2N+5..2N+7   bias-corrected EMAs of entry 2N with beta 0.9, 0.99, 0.999
2N+8..2N+10  bias-corrected EMAs of entry 2N+1 with beta 0.9, 0.99, 0.999
2N+11        unsafe flag (1.0 while the safety rule forces "never hedge")
==========  ====================================================================================

The context (``context_spec``, ``info["context"]``) is the two beta = 0.99 EMAs (entries 2N+6, 2N+9).

Reward: ``-p95 / reward_scale`` where p95 is ``numpy.percentile(latencies, 95)`` of the requests completed in
the step (ms), times ``unsafe_penalty`` (3) on forced steps. Safety: the system becomes unsafe when the largest
queue at a step end exceeds ``unsafe_queue`` (50) and safe again when it is ``<= safe_queue`` (3); while unsafe
the action is replaced by "never hedge" and ``info["forced"]`` is True, so agents can mask those steps out of
the policy loss. The time-dependent discount of the step is ``info["gamma"] = gamma_per_s ** elapsed_s``.

Run metrics (:meth:`StragglerMitigationEnv.run_metrics`, merged into run summaries by :func:`lcpo.online.run.execute`):
the paper's tail metric (mean over 5-minute arrival buckets of each bucket's p95 latency,
:func:`~lcpo.envs.straggler.metrics.bucketed_p95`) and the mean per-step p95, accumulated since the last fresh
reset. The simulator always keeps its per-request log; every :data:`METRIC_DRAIN_STEPS` steps the
environment folds the new rows into per-bucket latency lists and closes (reduces to one p95 value) every bucket
that no request in flight or yet to arrive can still join, so memory stays at about one bucket of latencies
(10^4 values) however long the run is. With ``log_requests=False`` the log is emptied after each fold.

Networks: ``default_network = "perm-invariant"`` (:mod:`lcpo.envs.straggler.nets`), picked by agents whose
``network`` hyperparameter is ``"auto"``.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import gymnasium as gym
import numpy as np
from numba import njit

from lcpo.envs.arguments import flag, integer, number
from lcpo.envs.context import ContextSpec
from lcpo.envs.straggler.metrics import bucket_percentiles
from lcpo.envs.straggler.sim import (
    _I_HEAP,
    _I_LOG_N,
    _KIND_DISPATCH,
    NEVER,
    TIMEOUTS_MS,
    Simulator,
    percentile95,
)
from lcpo.envs.straggler.workloads import Workload, resolve_workload
from lcpo.envs.termination import never_terminates
from lcpo.persistence.strict_json import show

__all__ = ["METRIC_DRAIN_STEPS", "StragglerMitigationEnv", "make_straggler_env", "obs_names"]

#: Steps between folds of the simulator's request log into the run-metric accumulators.
METRIC_DRAIN_STEPS = 600

_BETAS = np.array([0.9, 0.99, 0.999])
# Slots of the float environment state ``_es``.
_E_HPOS, _E_T, _E_UNSAFE, _E_RATE_SCALE, _E_SIZE_SCALE, _E_UNSAFE_Q, _E_SAFE_Q = 0, 1, 2, 3, 4, 5, 6
_N_E = 7


def obs_names(n_servers: int = 10) -> tuple[str, ...]:
    """Names of the observation entries for ``n_servers`` servers (``2 N + 12`` names)."""
    names = [f"queue[{j}]" for j in range(n_servers)] + [f"avg_queue[{j}]" for j in range(n_servers)]
    names += ["rate_4", "size_4", "max_rate_4", "max_size_4", "load_4"]
    names += [f"rate_ema_{b:g}" for b in _BETAS] + [f"size_ema_{b:g}" for b in _BETAS] + ["unsafe"]
    return tuple(names)


@njit(cache=True)
def _features(q, qint, dur, n_arr, svc, ia, hist, ema, es, betas, obs):
    """Write the observation for the step just simulated and update history, EMAs and the safety flag."""
    n = q.shape[0]
    for j in range(n):
        obs[j] = q[j]
        obs[n + j] = qint[j] / dur if dur > 0.0 else q[j]
    p = int(es[_E_HPOS])
    hist[p, 0] = n_arr
    hist[p, 1] = dur
    hist[p, 2] = svc
    hist[p, 3] = ia
    es[_E_HPOS] = (p + 1) % hist.shape[0]
    rs = es[_E_RATE_SCALE]
    ss = es[_E_SIZE_SCALE]
    a_sum = 0.0
    d_sum = 0.0
    s_sum = 0.0
    i_sum = 0.0
    max_rate = 0.0
    max_size = 0.0
    for r in range(hist.shape[0]):
        a_sum += hist[r, 0]
        d_sum += hist[r, 1]
        s_sum += hist[r, 2]
        i_sum += hist[r, 3]
        if hist[r, 1] > 0.0:
            rate = hist[r, 0] * 1000.0 / hist[r, 1] / rs
            if rate > max_rate:
                max_rate = rate
        if hist[r, 0] > 0.0:
            size = hist[r, 2] / hist[r, 0] / ss
            if size > max_size:
                max_size = size
    rate4 = a_sum * 1000.0 / d_sum / rs if d_sum > 0.0 else 0.0
    size4 = s_sum / a_sum / ss if a_sum > 0.0 else 0.0
    load = s_sum / i_sum / n if i_sum > 0.0 else 0.0
    es[_E_T] += 1.0
    t = es[_E_T]
    base = 2 * n
    obs[base] = rate4
    obs[base + 1] = size4
    obs[base + 2] = max_rate
    obs[base + 3] = max_size
    obs[base + 4] = load
    for k in range(betas.shape[0]):
        b = betas[k]
        ema[0, k] = b * ema[0, k] + (1.0 - b) * rate4
        ema[1, k] = b * ema[1, k] + (1.0 - b) * size4
        corr = 1.0 - b ** t
        obs[base + 5 + k] = ema[0, k] / corr
        obs[base + 8 + k] = ema[1, k] / corr
    maxq = 0
    for j in range(n):
        if q[j] > maxq:
            maxq = q[j]
    if es[_E_UNSAFE] == 0.0 and maxq > es[_E_UNSAFE_Q]:
        es[_E_UNSAFE] = 1.0
    elif es[_E_UNSAFE] != 0.0 and maxq <= es[_E_SAFE_Q]:
        es[_E_UNSAFE] = 0.0
    obs[base + 11] = es[_E_UNSAFE]


class StragglerMitigationEnv(gym.Env):
    """Request hedging for a 10-server load balancer, driven by a workload trace (the context).

    Args:
        workload: a :class:`~lcpo.envs.straggler.workloads.Workload`, an ``(n, 2)`` array of
            (processing ms, inter-arrival ms), a preset name (``"azure-llm"`` default, ``"synthetic-ramp"``,
            ``"synthetic-noisy"``, ``"constant-60x28"``, ``"constant-20x80"``) or a ``.npy``/``.csv`` path.
            None: ``"azure-llm"``.
        workload_seed: seed of synthetic presets.
        n_servers: number of servers ``N`` (spec: 10; the observation has ``2 N + 12`` entries).
        window_ms: decision window (ms).
        reward_scale: divisor of the p95 latency in the reward (spec: 1600).
        unsafe_queue: the system becomes unsafe when the largest queue exceeds this.
        safe_queue: ... and safe again when the largest queue is at most this.
        unsafe_penalty: reward multiplier of forced (unsafe) steps (spec: 3).
        gamma_per_s: discount per second of simulated time (spec: 0.81).
        p_inflate: straggler probability per copy (0.1); inflate_factor: straggler slowdown (10).
        rate_scale: arrival-rate normalizer (req/s); default: the workload's trace-wide rate.
        size_scale: service-time normalizer (ms); default: the workload's mean size times the mean inflation
            ``1 + p_inflate (inflate_factor - 1)`` (1.9).
        overload_queue: ``info["overload"]`` is True when a queue reaches this length.
        log_requests: keep the simulator's whole per-request log (``env.unwrapped.sim.request_log``); if False
            the log only holds the requests completed since the last fold into the run metrics.
        metric_bucket_ms: bucket width of the paper's metric in :meth:`run_metrics` (5 minutes).
        trace: alias of ``workload`` (what ``lcpo run --trace`` and sweep files pass to every environment).

    Raises:
        ValueError: an invalid argument, named as given with its value (:mod:`lcpo.envs.arguments`: counts and
            seeds must be integers, scales and times finite numbers > 0, ``gamma_per_s`` in (0, 1],
            ``p_inflate`` in [0, 1], ``log_requests`` true or false), ``safe_queue >= unsafe_queue``; both
            ``workload`` and ``trace`` given.
        lcpo.envs.straggler.workloads.WorkloadError: an invalid workload.
    """

    metadata = {"render_modes": [], "continuing": True}  # never ends by itself (lcpo.envs.task)
    #: no terminal states: the declared rule of :mod:`lcpo.envs.termination`
    termination_fn = staticmethod(never_terminates)
    #: network kind agents use when their ``network`` hyperparameter is ``"auto"`` (:data:`lcpo.agents.nets.NETWORKS`)
    default_network = "perm-invariant"

    def __init__(self, workload: Workload | np.ndarray | str | os.PathLike | None = None, workload_seed: int = 0,
                 n_servers: int = 10, window_ms: float = 500.0, reward_scale: float = 1600.0,
                 unsafe_queue: int = 50, safe_queue: int = 3, unsafe_penalty: float = 3.0,
                 gamma_per_s: float = 0.81, p_inflate: float = 0.1, inflate_factor: float = 10.0,
                 rate_scale: float | None = None, size_scale: float | None = None, overload_queue: int = 10_000,
                 log_requests: bool = False, metric_bucket_ms: float = 300_000.0,
                 trace: Workload | np.ndarray | str | os.PathLike | None = None) -> None:
        if trace is not None and workload is not None:
            raise ValueError(f"give the workload once: workload={show(workload)} and its alias trace={show(trace)}")
        workload = trace if trace is not None else (workload if workload is not None else "azure-llm")
        # every argument checked before anything is built, named as given with its value (lcpo.envs.arguments)
        workload_seed = integer(workload_seed, "workload_seed", minimum=0)
        n_servers = integer(n_servers, "n_servers")
        window_ms, reward_scale, unsafe_penalty, metric_bucket_ms = (
            number(v, name, low=0.0, low_open=True) for name, v in (
                ("window_ms", window_ms), ("reward_scale", reward_scale), ("unsafe_penalty", unsafe_penalty),
                ("metric_bucket_ms", metric_bucket_ms)))
        overload_queue = integer(overload_queue, "overload_queue")
        unsafe_queue, safe_queue = integer(unsafe_queue, "unsafe_queue", 0), integer(safe_queue, "safe_queue", 0)
        gamma_per_s = number(gamma_per_s, "gamma_per_s", low=0.0, high=1.0, low_open=True)
        p_inflate = number(p_inflate, "p_inflate", low=0.0, high=1.0)
        inflate_factor = number(inflate_factor, "inflate_factor", low=0.0)
        rate_scale = number(rate_scale, "rate_scale", low=0.0, low_open=True, none="the workload's mean rate")
        size_scale = number(size_scale, "size_scale", low=0.0, low_open=True, none="the workload's mean size")
        log_requests = flag(log_requests, "log_requests")
        if not (0 <= safe_queue < unsafe_queue):
            raise ValueError(f"need 0 <= safe_queue < unsafe_queue, got {safe_queue!r}, {unsafe_queue!r}")
        self.workload = resolve_workload(workload, seed=workload_seed)
        self.n_servers = int(n_servers)
        self.window_ms = float(window_ms)
        self.reward_scale = float(reward_scale)
        self.unsafe_penalty = float(unsafe_penalty)
        self.gamma_per_s = float(gamma_per_s)
        self.overload_queue = int(overload_queue)
        self.log_requests = bool(log_requests)
        self.metric_bucket_ms = float(metric_bucket_ms)
        # the log always runs: run_metrics() folds it into per-bucket accumulators (and empties it unless the
        # user asked to keep it)
        self.sim = Simulator(self.workload, n_servers, p_inflate, inflate_factor, seed=0, log=True)
        mean_inflation = 1.0 + self.sim.p_inflate * (self.sim.inflate_factor - 1.0)
        self.rate_scale = float(rate_scale if rate_scale is not None else self.workload.mean_rate)
        self.size_scale = float(size_scale if size_scale is not None else self.workload.mean_size * mean_inflation)
        for name, v in (("rate_scale", self.rate_scale), ("size_scale", self.size_scale)):
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be positive and finite, got {v!r}")
        self.unsafe_queue, self.safe_queue = int(unsafe_queue), int(safe_queue)
        dim = 2 * self.n_servers + 12
        self.observation_space = gym.spaces.Box(0.0, np.inf, shape=(dim,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(len(TIMEOUTS_MS))
        base = 2 * self.n_servers
        self.context_spec = ContextSpec(indices=(base + 6, base + 9), names=("rate_ema_0.99", "size_ema_0.99"),
                                        groups=((base + 6,), (base + 9,)),
                                        units="normalized by rate_scale (req/s) and size_scale (ms)",
                                        ood_thresholds={"mahalanobis": 24.0})  # the paper's "Med" D^2
        self.obs_names = obs_names(self.n_servers)
        self._timeouts = [float(x) for x in TIMEOUTS_MS]
        self._started = False
        self._init_state()

    def _init_state(self) -> None:
        self._obs = np.zeros(self.observation_space.shape, np.float32)
        self._hist = np.zeros((4, 4), np.float64)
        self._ema = np.zeros((2, 3), np.float64)
        self._es = np.zeros(_N_E, np.float64)
        self._es[[_E_RATE_SCALE, _E_SIZE_SCALE, _E_UNSAFE_Q, _E_SAFE_Q]] = (
            self.rate_scale, self.size_scale, self.unsafe_queue, self.safe_queue)
        self._steps = 0
        self._init_metrics()

    def _init_metrics(self) -> None:
        self._p95_sum = 0.0       # sum of per-step p95 (ms)
        self._forced_steps = 0
        self._log_read = 0        # rows of sim.log already folded
        self._open_arr = np.zeros(0, np.float64)  # arrivals (ms) / latencies (ms) of requests in open buckets
        self._open_lat = np.zeros(0, np.float64)
        self._closed_p95 = np.zeros(0, np.float64)  # p95 of each closed non-empty bucket, ascending buckets
        self._closed_upto = 0     # buckets < this index are closed

    def _oldest_in_flight_arrival(self) -> float:
        """Arrival time (ms) of the oldest request still in flight (``inf`` if none), from the pending events:
        pending duplicate dispatches carry their arrival, pending winning finishes ``finish - latency``."""
        sim = self.sim
        slots = sim.heap[: sim.si[_I_HEAP]]
        if slots.size == 0:
            return np.inf
        ef = sim.ev_f[slots]
        dup = sim.ev_i[slots, 0] >= _KIND_DISPATCH
        win = ~dup & (ef[:, 1] >= 0.0)
        arr = np.concatenate((ef[dup, 1], ef[win, 0] - ef[win, 1]))
        return float(arr.min()) if arr.size else np.inf

    def _fold_log(self) -> None:
        """Move the new request-log rows into the open buckets, then close the buckets no request can join."""
        sim = self.sim
        n = int(sim.si[_I_LOG_N])
        rows = sim.log[self._log_read:n]
        w = self.metric_bucket_ms
        if rows.shape[0]:
            if np.floor(rows[:, 1].min() / w) < self._closed_upto:  # pragma: no cover - invariant
                raise RuntimeError("straggler run metrics: a request completed in an already closed bucket")
            self._open_arr = np.concatenate((self._open_arr, rows[:, 1]))
            self._open_lat = np.concatenate((self._open_lat, rows[:, 2]))
        if self.log_requests:
            self._log_read = n
        else:
            sim.si[_I_LOG_N] = 0
            self._log_read = 0
        # future arrivals come at >= now; 1 ms margin against rounding of the logged arrival (finish - latency)
        frontier = min(sim.now, self._oldest_in_flight_arrival()) - 1.0
        k = int(np.floor(frontier / w)) if frontier > 0 else 0
        if k <= self._closed_upto:
            return
        done = np.floor(self._open_arr / w) < k
        if done.any():
            vals = bucket_percentiles(self._open_arr[done], self._open_lat[done], w)[1]
            self._closed_p95 = np.concatenate((self._closed_p95, vals))
            self._open_arr, self._open_lat = self._open_arr[~done], self._open_lat[~done]
        self._closed_upto = k

    def bucket_p95s(self) -> np.ndarray:
        """Per-bucket p95 latencies (ms) of the run since the last fresh reset, the values
        :meth:`run_metrics` averages.

        Returns:
            ``(m,)`` float64, one value per non-empty ``metric_bucket_ms`` bucket of request arrivals, in time
            order; the last buckets hold only the requests completed so far. Does not change the state.
        """
        n = int(self.sim.si[_I_LOG_N])
        rows = self.sim.log[self._log_read:n]
        arr = np.concatenate((self._open_arr, rows[:, 1]))
        lat = np.concatenate((self._open_lat, rows[:, 2]))
        vals = self._closed_p95
        if arr.size:
            vals = np.concatenate((vals, bucket_percentiles(arr, lat, self.metric_bucket_ms)[1]))
        return vals

    def run_metrics(self) -> dict:
        """Tail-latency metrics of the run since the last fresh reset (paper Section 6 metric; issue 7 item 5).

        Does not change the environment's state. Requests still in flight are not counted (the last
        buckets hold only the requests completed so far), so the result equals
        ``bucketed_p95(log[:, 1], log[:, 2])`` on the full request log of the same run.

        Returns:
            A dict of plain floats/ints: ``bucketed_p95_ms`` (mean over ``metric_bucket_ms`` (5-minute) buckets
            of request arrivals of each non-empty bucket's p95 latency, ms; None before any completion),
            ``mean_step_p95_ms`` (mean of the per-step p95 latencies ``info["p95_ms"]``, forced steps included,
            ms; None before the first step), ``buckets`` (number of non-empty buckets), ``forced_fraction``
            (fraction of steps whose action the safety rule forced), ``completions`` (requests completed).
        """
        vals = self.bucket_p95s()
        steps = self._steps
        return {"bucketed_p95_ms": float(vals.mean()) if vals.size else None,
                "mean_step_p95_ms": self._p95_sum / steps if steps else None,
                "buckets": int(vals.size),
                "forced_fraction": self._forced_steps / steps if steps else 0.0,
                "completions": int(self.sim.counters["completions"])}

    @property
    def unsafe(self) -> bool:
        """Whether the next step will be forced to "never hedge"."""
        return bool(self._es[_E_UNSAFE])

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Start the run (continuing task: call this once).

        The first reset, and any seeded reset, starts a fresh run: empty servers at time 0, the workload at its
        start, the inflation stream seeded from ``self.np_random`` (so ``reset(seed=s)`` reproduces a run
        exactly). An unseeded reset after that changes nothing: the system has no episodes and global time
        (the workload position) continues, as for the other ``lcpo`` environments' traces.

        Returns:
            ``(obs, info)``: the current observation (all zeros for the empty system of a fresh run), float32,
            and ``info`` with ``context`` (``(2,)`` float64).
        """
        if seed is not None or not self._started:
            super().reset(seed=seed)
            self.sim.reset(int(self.np_random.integers(0, 2**63 - 1)))
            self._init_state()
            self._started = True
        base = 2 * self.n_servers
        return self._obs.copy(), {"context": np.array((self._obs[base + 6], self._obs[base + 9]), np.float64)}

    def step(self, action) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Simulate one window with the chosen timeout.

        Args:
            action: int in ``[0, 9)``: index into :data:`TIMEOUTS_MS` (8 = never hedge).

        Returns:
            ``(obs, reward, False, False, info)`` with ``info`` keys: ``p95_ms`` (raw p95 latency of the
            step, ms), ``completions``, ``forced`` (safety override applied), ``unsafe`` (state after the
            step), ``timeout_ms`` (applied timeout, ``inf`` = never), ``elapsed_ms`` (step duration),
            ``gamma`` (``gamma_per_s ** (elapsed_ms / 1000)``), ``context`` (``(2,)`` float64), ``overload``
            (a queue reached ``overload_queue`` during the step), ``time_ms`` (simulation time at step end).

        Raises:
            ValueError: an action outside ``[0, 9)``.
            lcpo.envs.straggler.sim.SimulatorError: the workload overloads the simulator's event capacity.
        """
        a = int(action)
        if not 0 <= a < 9:
            raise ValueError(f"action must be an int in [0, 9), got {action!r}")
        sim = self.sim
        es = self._es
        forced = bool(es[_E_UNSAFE] != 0.0)
        tau = self._timeouts[NEVER if forced else a]
        start = sim.sf[0]
        sim.run(tau, start + self.window_ms)
        si, sf = sim.si, sim.sf
        n_done = int(si[12])
        p95 = percentile95(sim.lat, n_done)
        dur = float(sf[0] - start)
        _features(sim.q, sim.qint, dur, float(si[11]), sf[5], sf[6], self._hist, self._ema, es, _BETAS, self._obs)
        self._steps += 1
        self._p95_sum += p95
        self._forced_steps += forced
        if self._steps % METRIC_DRAIN_STEPS == 0:
            self._fold_log()
        reward = -p95 / self.reward_scale
        if forced:
            reward *= self.unsafe_penalty
        base = 2 * self.n_servers
        obs = self._obs
        info = {"p95_ms": p95, "completions": n_done, "forced": forced, "unsafe": bool(es[_E_UNSAFE] != 0.0),
                "timeout_ms": tau, "elapsed_ms": dur, "gamma": self.gamma_per_s ** (dur / 1000.0),
                "context": np.array((obs[base + 6], obs[base + 9]), np.float64),
                "overload": bool(si[15] >= self.overload_queue),
                "time_ms": float(sf[0])}
        return obs.copy(), float(reward), False, False, info

    # ------------------------------------------------------------------ checkpointing
    def get_state(self) -> dict:
        """Dynamics (simulator), workload position, observation history, safety flag, ``np_random`` state and
        the run-metric accumulators.

        Returns:
            A dict of NumPy arrays and plain Python values.
        """
        return {"sim": self.sim.get_state(), "obs": self._obs.copy(), "hist": self._hist.copy(),
                "ema": self._ema.copy(), "es": self._es.copy(), "steps": int(self._steps),
                "np_random": self.np_random.bit_generator.state, "started": bool(self._started),
                "metrics": {"p95_sum": float(self._p95_sum), "forced_steps": int(self._forced_steps),
                            "log_read": int(self._log_read), "open_arr": self._open_arr.copy(),
                            "open_lat": self._open_lat.copy(), "closed_p95": self._closed_p95.copy(),
                            "closed_upto": int(self._closed_upto)}}

    def set_state(self, state: dict) -> None:
        """Restore a state from :meth:`get_state` (same workload and constructor arguments).

        Raises:
            ValueError: the state's observation size differs from this environment's.
        """
        if np.shape(state["obs"]) != self.observation_space.shape:
            raise ValueError(f"state observation shape {np.shape(state['obs'])} does not match "
                             f"{self.observation_space.shape}")
        self.sim.set_state(state["sim"])
        self._obs = np.array(state["obs"], np.float32)
        self._hist = np.array(state["hist"], np.float64)
        self._ema = np.array(state["ema"], np.float64)
        self._es = np.array(state["es"], np.float64)
        self._steps = int(state["steps"])
        self._started = bool(state.get("started", True))
        self.np_random.bit_generator.state = state["np_random"]
        m = state["metrics"]
        self._p95_sum, self._forced_steps = float(m["p95_sum"]), int(m["forced_steps"])
        self._log_read, self._closed_upto = int(m["log_read"]), int(m["closed_upto"])
        self._open_arr = np.array(m["open_arr"], np.float64).reshape(-1)
        self._open_lat = np.array(m["open_lat"], np.float64).reshape(-1)
        self._closed_p95 = np.array(m["closed_p95"], np.float64).reshape(-1)


def make_straggler_env(**kwargs) -> StragglerMitigationEnv:
    """Entry point of ``lcpo/StragglerMitigation-v0``; keyword arguments as :class:`StragglerMitigationEnv`.

    With no arguments the environment runs on the bundled Azure LLM workload.
    """
    return StragglerMitigationEnv(**kwargs)


# the class's keywords, for an unknown argument's message (lcpo.envs.registration names the valid ones)
make_straggler_env.__signature__ = inspect.signature(StragglerMitigationEnv)
