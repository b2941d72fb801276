"""Discrete-event simulator of N FIFO servers with join-shortest-queue dispatch and request hedging.

This is the dynamics of the paper's computer-systems benchmark (straggler mitigation, paper Section 6 and
appendix; model in ``shared/specs/straggler.md``). The event loop is compiled with numba; the Python class
:class:`Simulator` owns the state arrays, feeds the workload in chunks and grows buffers when the compiled
loop asks for more room.

Model (times in ms):

- ``N`` servers, each a FIFO queue. A server's queue length counts every copy assigned to it and not yet
  finished, including the one in service (int32 counters).
- Each dispatched copy (original or duplicate) independently takes ``inflate_factor`` (10) times its
  request's size with probability ``p_inflate`` (0.1).
- A copy's finish time is fixed at dispatch: ``start = max(now, server's last scheduled finish)``,
  ``finish = start + service``.
- A new request goes to the server with the fewest outstanding copies (ties: lowest index). When it arrives at
  ``t`` under timeout ``tau`` (the one in force at its arrival) and ``t + tau`` is strictly before its
  original's finish, one duplicate is dispatched at ``t + tau`` to the shortest queue among the other
  servers. No cancellation: the request completes at the earlier copy's finish, the other copy still occupies
  its server. Latency = first finish - arrival.
- Event order at equal times: finishes before dispatches (arrivals and duplicates); other ties by insertion
  order. The next arrival is inserted when the previous arrival is processed; the finish event of an original
  that will be hedged takes its insertion number when the original is dispatched.

Randomness: inflation draws come from a SplitMix64 stream whose 64-bit state is part of the checkpointable
state, so a run is reproducible per seed and can be resumed exactly.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["TIMEOUTS_MS", "NEVER", "Simulator", "percentile95", "SimulatorError"]

#: The action set: timeouts in ms for actions 0..7, ``inf`` ("never hedge") for action 8.
TIMEOUTS_MS = np.array([3.0, 10.0, 30.0, 60.0, 100.0, 300.0, 600.0, 1000.0, np.inf])
#: Index of the "never hedge" action.
NEVER = 8

# Status codes returned by the compiled loop.
_DONE, _NEED_TRACE, _NEED_GROW = 0, 1, 2

# Event keys: kind * 2**62 + insertion number; finishes (kind 0) sort before dispatches (kind 1).
_KIND_DISPATCH = np.int64(1) << np.int64(62)

# Integer state slots.
_I_HEAP, _I_FREE, _I_SEQ, _I_POS, _I_HAVE_NEXT, _I_NEXT_SEQ = 0, 1, 2, 3, 4, 5
_I_NARR, _I_NDONE, _I_NCOPIES, _I_NDUPS, _I_NINFL = 6, 7, 8, 9, 10
_I_STEP_ARR, _I_STEP_DONE, _I_LOG_N, _I_LOG_ON, _I_STEP_MAXQ, _I_MAXQ = 11, 12, 13, 14, 15, 16
_N_I = 17
# Float state slots.
_F_NOW, _F_LAST_ARR, _F_NEXT_T, _F_BUSY, _F_STEP_START, _F_STEP_SVC, _F_STEP_IA = 0, 1, 2, 3, 4, 5, 6
_N_F = 7
# Columns of the per-request log.
LOG_COLUMNS = ("request_id", "arrival_ms", "latency_ms", "hedged", "original_finish_ms")


class SimulatorError(RuntimeError):
    """The simulation cannot continue (e.g. an overloaded workload exhausted the event capacity)."""


@njit(cache=True)
def _uniform(rng):
    """SplitMix64 step on ``rng[0]`` (uint64); returns a float64 uniform in [0, 1)."""
    rng[0] += np.uint64(0x9E3779B97F4A7C15)
    z = rng[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.float64(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def _less(ev_f, ev_i, a, b):
    ta = ev_f[a, 0]
    tb = ev_f[b, 0]
    return ta < tb or (ta == tb and ev_i[a, 0] < ev_i[b, 0])


@njit(cache=True)
def _push(heap, ev_f, ev_i, free, si, t, key, a, b, c, d, srv, rid, ref):
    nfree = si[_I_FREE] - 1
    slot = free[nfree]
    si[_I_FREE] = nfree
    ev_f[slot, 0] = t
    ev_f[slot, 1] = a
    ev_f[slot, 2] = b
    ev_f[slot, 3] = c
    ev_f[slot, 4] = d
    ev_i[slot, 0] = key
    ev_i[slot, 1] = srv
    ev_i[slot, 2] = rid
    ev_i[slot, 3] = ref
    i = si[_I_HEAP]
    si[_I_HEAP] = i + 1
    while i > 0:
        p = (i - 1) >> 1
        if _less(ev_f, ev_i, slot, heap[p]):
            heap[i] = heap[p]
            i = p
        else:
            break
    heap[i] = slot


@njit(cache=True)
def _pop(heap, ev_f, ev_i, free, si):
    top = heap[0]
    n = si[_I_HEAP] - 1
    si[_I_HEAP] = n
    if n > 0:
        last = heap[n]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and _less(ev_f, ev_i, heap[c + 1], heap[c]):
                c += 1
            if _less(ev_f, ev_i, heap[c], last):
                heap[i] = heap[c]
                i = c
            else:
                break
        heap[i] = last
    free[si[_I_FREE]] = top
    si[_I_FREE] += 1
    return top


@njit(cache=True)
def _shortest(q, exclude):
    best = -1
    bq = np.int32(2147483647)
    for j in range(q.shape[0]):
        if j != exclude and q[j] < bq:
            bq = q[j]
            best = j
    return best


@njit(cache=True)
def _integrate(q, qint, qbusy, dt):
    for j in range(q.shape[0]):
        qint[j] += q[j] * dt
        if q[j] > 0:
            qbusy[j] += dt


@njit(cache=True)
def _note_queue(q, j, si):
    if q[j] > si[_I_STEP_MAXQ]:
        si[_I_STEP_MAXQ] = q[j]
    if q[j] > si[_I_MAXQ]:
        si[_I_MAXQ] = q[j]


@njit(cache=True)
def _begin_step(q, qint, sf, si):
    for j in range(q.shape[0]):
        qint[j] = 0.0
    si[_I_STEP_ARR] = 0
    si[_I_STEP_DONE] = 0
    m = 0
    for j in range(q.shape[0]):
        if q[j] > m:
            m = q[j]
    si[_I_STEP_MAXQ] = m
    sf[_F_STEP_START] = sf[_F_NOW]
    sf[_F_STEP_SVC] = 0.0
    sf[_F_STEP_IA] = 0.0


@njit(cache=True)
def _run(trace, tau, window_end, need_completion, p_infl, infl_factor,
         q, lastfin, qint, qbusy, sf, si, rng, heap, ev_f, ev_i, free, lat, log):
    """Process events up to ``window_end`` (then, if ``need_completion``, until one request completes).

    Returns a status: ``_DONE``, ``_NEED_TRACE`` (the current chunk is used up) or ``_NEED_GROW`` (an event,
    latency or log buffer is full). All progress lives in the arrays, so the caller can fix the cause and call
    again with the same arguments.
    """
    n_srv = q.shape[0]
    while True:
        if si[_I_HAVE_NEXT] == 0:
            pos = si[_I_POS]
            if pos >= trace.shape[0]:
                return _NEED_TRACE
            sf[_F_NEXT_T] = sf[_F_LAST_ARR] + trace[pos, 1]
            si[_I_NEXT_SEQ] = si[_I_SEQ]
            si[_I_SEQ] += 1
            si[_I_HAVE_NEXT] = 1
        te = sf[_F_NEXT_T]
        use_arrival = True
        if si[_I_HEAP] > 0:
            top = heap[0]
            ht = ev_f[top, 0]
            if ht < te or (ht == te and ev_i[top, 0] < _KIND_DISPATCH + si[_I_NEXT_SEQ]):
                use_arrival = False
                te = ht
        if te > window_end and (si[_I_STEP_DONE] > 0 or not need_completion):
            if window_end > sf[_F_NOW]:
                _integrate(q, qint, qbusy, window_end - sf[_F_NOW])
                sf[_F_NOW] = window_end
            return _DONE
        if (si[_I_FREE] < 3 or si[_I_STEP_DONE] >= lat.shape[0]
                or (si[_I_LOG_ON] != 0 and si[_I_LOG_N] >= log.shape[0])):
            return _NEED_GROW
        dt = te - sf[_F_NOW]
        if dt > 0.0:
            _integrate(q, qint, qbusy, dt)
        sf[_F_NOW] = te
        if use_arrival:
            pos = si[_I_POS]
            size = trace[pos, 0]
            si[_I_POS] = pos + 1
            si[_I_HAVE_NEXT] = 0
            sf[_F_LAST_ARR] = te
            rid = si[_I_NARR]
            si[_I_NARR] += 1
            si[_I_STEP_ARR] += 1
            sf[_F_STEP_IA] += trace[pos, 1]
            j = _shortest(q, -1)
            s = size
            if _uniform(rng) < p_infl:
                s = size * infl_factor
                si[_I_NINFL] += 1
            start = lastfin[j] if lastfin[j] > te else te
            f1 = start + s
            lastfin[j] = f1
            q[j] += 1
            _note_queue(q, j, si)
            sf[_F_BUSY] += s
            sf[_F_STEP_SVC] += s
            si[_I_NCOPIES] += 1
            if tau > 0.0 and n_srv > 1 and te + tau < f1:
                ref = si[_I_SEQ]
                si[_I_SEQ] += 2
                _push(heap, ev_f, ev_i, free, si, te + tau, _KIND_DISPATCH + ref + 1,
                      te, f1, 0.0, size, j, rid, ref)
            else:
                key = si[_I_SEQ]
                si[_I_SEQ] += 1
                _push(heap, ev_f, ev_i, free, si, f1, key, f1 - te, 0.0, f1, 0.0, j, rid, 0)
        else:
            slot = _pop(heap, ev_f, ev_i, free, si)
            key = ev_i[slot, 0]
            srv = ev_i[slot, 1]
            rid = ev_i[slot, 2]
            if key >= _KIND_DISPATCH:
                arr_t = ev_f[slot, 1]
                f1 = ev_f[slot, 2]
                size = ev_f[slot, 4]
                ref = ev_i[slot, 3]
                j = _shortest(q, srv)
                s = size
                if _uniform(rng) < p_infl:
                    s = size * infl_factor
                    si[_I_NINFL] += 1
                start = lastfin[j] if lastfin[j] > te else te
                f2 = start + s
                lastfin[j] = f2
                q[j] += 1
                _note_queue(q, j, si)
                sf[_F_BUSY] += s
                si[_I_NCOPIES] += 1
                si[_I_NDUPS] += 1
                key2 = si[_I_SEQ]
                si[_I_SEQ] += 1
                if f2 < f1:
                    _push(heap, ev_f, ev_i, free, si, f1, ref, -1.0, 1.0, f1, 0.0, srv, rid, 0)
                    _push(heap, ev_f, ev_i, free, si, f2, key2, f2 - arr_t, 1.0, f1, 0.0, j, rid, 0)
                else:
                    _push(heap, ev_f, ev_i, free, si, f1, ref, f1 - arr_t, 1.0, f1, 0.0, srv, rid, 0)
                    _push(heap, ev_f, ev_i, free, si, f2, key2, -1.0, 1.0, f1, 0.0, j, rid, 0)
            else:
                latency = ev_f[slot, 1]
                q[srv] -= 1
                if latency >= 0.0:
                    lat[si[_I_STEP_DONE]] = latency
                    si[_I_STEP_DONE] += 1
                    si[_I_NDONE] += 1
                    if si[_I_LOG_ON] != 0:
                        n = si[_I_LOG_N]
                        log[n, 0] = rid
                        log[n, 1] = te - latency
                        log[n, 2] = latency
                        log[n, 3] = ev_f[slot, 2]
                        log[n, 4] = ev_f[slot, 3]
                        si[_I_LOG_N] = n + 1
                    if need_completion and te > window_end:
                        return _DONE


@njit(cache=True)
def percentile95(lat, n):
    """95th percentile of ``lat[:n]`` with linear interpolation, equal to ``numpy.percentile(lat[:n], 95)``.

    Args:
        lat: ``(m,)`` float64 buffer, ``m >= n``.
        n: number of valid values, ``n >= 1``.

    Returns:
        The percentile (float64), computed with NumPy's formulas (virtual index ``(n - 1) q`` and
        NumPy's two-sided linear interpolation), so it matches ``numpy.percentile`` to the last bit.
    """
    x = np.sort(lat[:n])
    v = (n - 1) * 0.95
    if v >= n - 1:
        return x[n - 1]
    if v < 0:
        return x[0]
    lo = int(np.floor(v))
    g = v - lo
    a = x[lo]
    b = x[lo + 1]
    d = b - a
    if g >= 0.5:
        return b - d * (1.0 - g)
    return a + d * g


class Simulator:
    """The load balancer: state arrays, workload feeding and the compiled event loop.

    Args:
        workload: a :class:`lcpo.envs.straggler.workloads.Workload` (anything with ``chunk(k)`` returning
            ``(data (n, 2) float64 [processing ms, inter-arrival ms], tail_gap_ms)``).
        n_servers: number of servers ``N`` (spec: 10).
        p_inflate: straggler probability per dispatched copy (spec: 0.1).
        inflate_factor: service-time multiplier of a straggling copy (spec: 10).
        seed: seed of the inflation stream (an int, or ``None`` for fresh OS entropy).
        log: keep a per-request log (columns :data:`LOG_COLUMNS`) for tests and the paper's metric.
        capacity: initial number of event slots (grown by doubling as needed).
        max_capacity: event slots beyond which the workload is declared overloaded (:class:`SimulatorError`).

    Raises:
        ValueError: for ``n_servers < 1``, ``p_inflate`` outside [0, 1], a non-finite or negative
            ``inflate_factor``.
    """

    def __init__(self, workload, n_servers: int = 10, p_inflate: float = 0.1, inflate_factor: float = 10.0,
                 seed: int | None = 0, log: bool = False, capacity: int = 1024,
                 max_capacity: int = 1 << 24) -> None:
        if int(n_servers) < 1:
            raise ValueError(f"n_servers must be >= 1, got {n_servers!r}")
        if not (0.0 <= float(p_inflate) <= 1.0):
            raise ValueError(f"p_inflate must be in [0, 1], got {p_inflate!r}")
        if not np.isfinite(inflate_factor) or inflate_factor < 0:
            raise ValueError(f"inflate_factor must be finite and >= 0, got {inflate_factor!r}")
        self.workload = workload
        self.n_servers = int(n_servers)
        self.p_inflate = float(p_inflate)
        self.inflate_factor = float(inflate_factor)
        self.log_enabled = bool(log)
        self.max_capacity = int(max_capacity)
        self._init_capacity = max(16, int(capacity))
        self.reset(seed)

    # ------------------------------------------------------------------ state
    def reset(self, seed: int | None = 0) -> None:
        """Empty system at time 0, workload at its start, inflation stream seeded with ``seed``."""
        n, cap = self.n_servers, self._init_capacity
        self.q = np.zeros(n, np.int32)
        self.lastfin = np.zeros(n, np.float64)
        self.qint = np.zeros(n, np.float64)
        self.qbusy = np.zeros(n, np.float64)
        self.sf = np.zeros(_N_F, np.float64)
        self.si = np.zeros(_N_I, np.int64)
        self.si[_I_LOG_ON] = int(self.log_enabled)
        ss = np.random.SeedSequence(seed)
        self.rng = ss.generate_state(1, np.uint64)
        self.heap = np.zeros(cap, np.int32)
        self.ev_f = np.zeros((cap, 5), np.float64)
        self.ev_i = np.zeros((cap, 4), np.int64)
        self.free = np.arange(cap - 1, -1, -1, dtype=np.int32)
        self.si[_I_FREE] = cap
        self.lat = np.zeros(256, np.float64)
        self.log = np.zeros((4096 if self.log_enabled else 0, 5), np.float64)
        self._chunk_k = 0
        self._chunk_carry = 0.0  # added to the current chunk's first inter-arrival
        self._next_carry = 0.0   # tail gap of the current chunk, for the next one
        self._load_chunk(0, 0.0)

    def _load_chunk(self, k: int, carry: float) -> None:
        data, tail = self.workload.chunk(k)
        data = np.asarray(data, np.float64)
        if data.ndim != 2 or data.shape[1] != 2:
            raise SimulatorError(f"workload chunk {k} has shape {data.shape}, expected (n, 2)")
        if carry != 0.0 and data.shape[0] > 0:
            data = data.copy()
            data[0, 1] += carry
        self.trace = data
        self._chunk_k = k
        self._chunk_carry = carry
        self._next_carry = float(tail)
        self.si[_I_POS] = 0

    def _next_chunk(self) -> None:
        k, carry = self._chunk_k, self._next_carry
        for _ in range(1_000_000):
            k += 1
            data, tail = self.workload.chunk(k)
            if len(data) > 0:
                self._load_chunk(k, carry)
                return
            carry += float(tail)
        raise SimulatorError("workload produced no requests in 1,000,000 consecutive chunks")

    def _grow(self) -> None:
        si = self.si
        if si[_I_FREE] < 3:
            cap = self.heap.shape[0]
            new = 2 * cap
            if new > self.max_capacity:
                raise SimulatorError(
                    f"more than {self.max_capacity} pending events (largest queue {int(self.q.max())}, "
                    f"time {self.now:.0f} ms): the workload overloads the servers")
            self.heap = np.concatenate([self.heap, np.zeros(cap, np.int32)])
            self.ev_f = np.concatenate([self.ev_f, np.zeros((cap, 5))])
            self.ev_i = np.concatenate([self.ev_i, np.zeros((cap, 4), np.int64)])
            nfree = int(si[_I_FREE])
            free = np.zeros(new, np.int32)
            free[:cap] = np.arange(new - 1, cap - 1, -1, dtype=np.int32)
            free[cap:cap + nfree] = self.free[:nfree]
            self.free = free
            si[_I_FREE] = cap + nfree
        if si[_I_STEP_DONE] >= self.lat.shape[0]:
            self.lat = np.concatenate([self.lat, np.zeros_like(self.lat)])
        if si[_I_LOG_ON] and si[_I_LOG_N] >= self.log.shape[0]:
            self.log = np.concatenate([self.log, np.zeros_like(self.log)])

    def run(self, tau: float, window_end: float, need_completion: bool = True, begin: bool = True) -> None:
        """Advance the simulation.

        Args:
            tau: hedging timeout (ms) for requests arriving now; ``inf`` or ``<= 0`` means never hedge.
            window_end: absolute time (ms) up to which events are processed (events at exactly
                ``window_end`` included).
            need_completion: if True and no request completed since the step began, continue past
                ``window_end`` until one does (the step then ends at that completion).
            begin: start a new step (reset the per-step counters and time integrals).

        Raises:
            SimulatorError: if the workload overloads the servers beyond ``max_capacity`` pending events.
        """
        if begin:
            _begin_step(self.q, self.qint, self.sf, self.si)
        while True:
            status = _run(self.trace, float(tau), float(window_end), bool(need_completion), self.p_inflate,
                          self.inflate_factor, self.q, self.lastfin, self.qint, self.qbusy, self.sf, self.si,
                          self.rng, self.heap, self.ev_f, self.ev_i, self.free, self.lat, self.log)
            if status == _DONE:
                return
            if status == _NEED_TRACE:
                self._next_chunk()
            else:
                self._grow()

    # ------------------------------------------------------------------ read-outs
    @property
    def now(self) -> float:
        """Current simulation time (ms)."""
        return float(self.sf[_F_NOW])

    @property
    def step_start(self) -> float:
        """Time (ms) at which the current step began."""
        return float(self.sf[_F_STEP_START])

    @property
    def step_latencies(self) -> np.ndarray:
        """``(k,)`` float64 view: latencies (ms) of the requests completed during the current step."""
        return self.lat[: self.si[_I_STEP_DONE]]

    @property
    def step_arrivals(self) -> int:
        """Requests that arrived during the current step."""
        return int(self.si[_I_STEP_ARR])

    @property
    def step_service_sum(self) -> float:
        """Sum of the (inflated) service times (ms) of the originals of requests arriving in this step."""
        return float(self.sf[_F_STEP_SVC])

    @property
    def step_interarrival_sum(self) -> float:
        """Sum of the inter-arrival times (ms) of the requests arriving in this step."""
        return float(self.sf[_F_STEP_IA])

    @property
    def step_max_queue(self) -> int:
        """Largest queue length reached during the current step (including its start)."""
        return int(self.si[_I_STEP_MAXQ])

    @property
    def counters(self) -> dict:
        """Totals since reset: arrivals, completions, copies, duplicates, inflated copies, busy time (ms),
        in-flight requests, largest queue ever seen."""
        si = self.si
        return {"arrivals": int(si[_I_NARR]), "completions": int(si[_I_NDONE]),
                "copies": int(si[_I_NCOPIES]), "duplicates": int(si[_I_NDUPS]),
                "inflated": int(si[_I_NINFL]), "busy_ms": float(self.sf[_F_BUSY]),
                "in_flight": int(si[_I_NARR] - si[_I_NDONE]), "max_queue": int(si[_I_MAXQ])}

    @property
    def request_log(self) -> np.ndarray:
        """``(completions, 5)`` float64 per-request log (columns :data:`LOG_COLUMNS`), in completion order.

        Raises:
            RuntimeError: if the simulator was built with ``log=False``.
        """
        if not self.log_enabled:
            raise RuntimeError("Simulator was created with log=False; no request log is kept")
        return self.log[: self.si[_I_LOG_N]]

    def pending_events(self) -> dict:
        """Pending events by type (for invariant checks): winning finishes, losing finishes, duplicates."""
        slots = self.heap[: self.si[_I_HEAP]]
        keys = self.ev_i[slots, 0]
        dup = keys >= _KIND_DISPATCH
        win = ~dup & (self.ev_f[slots, 1] >= 0)
        return {"finish_win": int(win.sum()), "finish_lose": int((~dup & ~win).sum()),
                "duplicate": int(dup.sum())}

    # ------------------------------------------------------------------ checkpointing
    def get_state(self) -> dict:
        """Full dynamic state (NumPy arrays and Python scalars): queues, events, counters, workload position
        and the inflation stream."""
        return {"q": self.q.copy(), "lastfin": self.lastfin.copy(), "qint": self.qint.copy(),
                "qbusy": self.qbusy.copy(), "sf": self.sf.copy(), "si": self.si.copy(),
                "rng": self.rng.copy(), "heap": self.heap.copy(), "ev_f": self.ev_f.copy(),
                "ev_i": self.ev_i.copy(), "free": self.free.copy(), "lat": self.lat.copy(),
                "log": self.log.copy(), "chunk_k": int(self._chunk_k),
                "chunk_carry": float(self._chunk_carry)}

    def set_state(self, state: dict) -> None:
        """Restore a state from :meth:`get_state` (the workload must be the same).

        Raises:
            ValueError: if the state's server count differs from this simulator's.
        """
        if len(state["q"]) != self.n_servers:
            raise ValueError(f"state has {len(state['q'])} servers, simulator has {self.n_servers}")
        pos = int(state["si"][_I_POS])
        self._load_chunk(int(state["chunk_k"]), float(state["chunk_carry"]))
        self.q = np.array(state["q"], np.int32)
        self.lastfin = np.array(state["lastfin"], np.float64)
        self.qint = np.array(state["qint"], np.float64)
        self.qbusy = np.array(state["qbusy"], np.float64)
        self.sf = np.array(state["sf"], np.float64)
        self.si = np.array(state["si"], np.int64)
        self.si[_I_POS] = pos
        self.rng = np.array(state["rng"], np.uint64)
        self.heap = np.array(state["heap"], np.int32)
        self.ev_f = np.array(state["ev_f"], np.float64)
        self.ev_i = np.array(state["ev_i"], np.int64)
        self.free = np.array(state["free"], np.int32)
        self.lat = np.array(state["lat"], np.float64)
        self.log = np.array(state["log"], np.float64).reshape(-1, 5)
