"""The learner behind a server: one agent fed from the log in log order, publishing acting snapshots.

**Learning is a function of the log.** The learner applies each record to its own copy of the
:class:`~lcpo.serve.protocol.ServerState` (so it knows which transitions a record completes) and feeds the
transitions to the agent by the rule below; nothing else reaches the agent (acting never touches it), so
replaying the same records into a fresh learner rebuilds the same state, bit for bit.

**How a rollout is assembled from many streams.** The on-policy agents' GAE assumes that consecutive rollout
rows are consecutive steps of one trajectory. The learner therefore keeps one *run* per stream: the stream's
transitions since the last update, in log order. When ``rollout_steps`` transitions are waiting over all
streams, the rollout is the streams' runs laid end to end, in the order of each run's first transition in the
log; every run except the last is *cut* at its end (its last transition is marked ``truncated`` unless it ended
its episode), so GAE bootstraps from ``V(next_obs)`` there exactly as at a rollout's end, and no advantage or
return accumulation crosses from one stream into another. The stream's next transitions start its next run.
With one stream this is exactly the in-process :meth:`~lcpo.agents.base.Agent.learn` schedule (one run, not
cut), so learning through the server equals learning in process on the same seed.

**A record the learner fails on.** Learning is a function of the log, so an update that raises on logged data (an
advantage or return beyond float32 from extreme but accepted rewards, ...) would raise again at every restart's
replay. The learner therefore stops *before* that record for good (:meth:`Learner.fail`): the failure (the
record's position and a one-line reason, :class:`LearnerFailure`) is written to ``STATE/learner-failure.json``
(:func:`record_failure`), the last published snapshot stays the acting policy, and nothing is checkpointed after
it. A restart replays the learner up to that record and no further, so it reaches the state the learner was in
before the failure and serves again. ``--resume-learner retry`` forgets the failure (after a fix, the replay
goes past the record again); ``--resume-learner skip`` moves it to the file's ``skipped`` list: at that record
the learner drops the rollout whose update failed (the transitions waiting since the last update, that record's
included) and learns on, at every later replay as well (:func:`resume_failure`).

**Acting snapshots.** After each update the learner publishes ``Snapshot(version, policy)``: the NumPy acting
mirror (:func:`lcpo.agents.nets.make_fast_policy`) of a copy of the actor; ``version`` counts updates. Requests
read the latest snapshot, never the agent. Action noise comes from :class:`ActingNoise`, the same Gumbel
stream ``OnPolicyAgent.act`` would draw, indexed by decision number.
"""

from __future__ import annotations

import collections
import copy
import json
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from lcpo.online.loop import Transition
from lcpo.serve.protocol import ServerState, unique_object

__all__ = ["SUPPORTED", "build_agent", "ActingNoise", "Snapshot", "Learner", "LearnerFailure", "FAILURE_FILE",
           "RESUME_CHOICES", "load_failures", "record_failure", "resume_failure"]


def _supported_check(cls, name: str) -> None:
    from lcpo.agents.base import OnPolicyAgent
    from lcpo.agents.batched import BatchOnPolicyAgent

    # both on-policy bases act by the same rule: Gumbel blocks of max(rollout_steps, 256) rows from rngs["act"]
    single = (issubclass(cls, OnPolicyAgent) and cls.act is OnPolicyAgent.act
              and cls._refill_noise is OnPolicyAgent._refill_noise and cls.observe is OnPolicyAgent.observe)
    batch = (issubclass(cls, BatchOnPolicyAgent) and cls.act is BatchOnPolicyAgent.act
             and cls.act_batch is BatchOnPolicyAgent.act_batch
             and cls._refill_noise is BatchOnPolicyAgent._refill_noise and cls.observe is BatchOnPolicyAgent.observe)
    if not (single or batch):
        raise ValueError(f"lcpo serve needs an on-policy agent that acts from its policy alone "
                         f"({', '.join(SUPPORTED)}); {name!r} acts through its own changing state "
                         "(exploration schedule, replay or offline training), which a published snapshot cannot "
                         "carry")


#: agents a server can run: on-policy, acting from the policy network alone (``OnPolicyAgent.act``).
SUPPORTED = ("a2c", "lcpo", "trpo", "ppo", "lcpo-p", "clear", "tabular-a2c")


def build_agent(env, name: str, seed: int, overrides: dict):
    """Construct a served agent.

    Raises:
        ValueError: an unknown agent name or one that cannot be served (not in :data:`SUPPORTED`'s family), a
            bad hyperparameter (named), or an agent that needs a context the ``--spec`` document does not declare.
    """
    from lcpo.agents import AGENTS

    if name not in AGENTS:
        raise ValueError(f"unknown agent {name!r}; servable: {', '.join(SUPPORTED)}")
    _supported_check(AGENTS[name], name)
    from lcpo.envs.context import MissingContextError

    try:
        return AGENTS[name](env, seed=seed, **overrides)
    except MissingContextError:
        if not getattr(getattr(env, "unwrapped", env), "from_spec_document", False):
            raise
        raise ValueError(f"agent {name!r} needs the served system's context (its OOD detector reads it), and the "
                         "--spec document declares none: add \"context\": {\"indices\": [...], \"names\": [...]} "
                         "(docs/serving.md, \"the spec file\")") from None


class ActingNoise:
    """Gumbel noise rows by decision number: row ``n`` is what ``OnPolicyAgent.act`` would use at its ``n``-th
    call (blocks of ``max(rollout_steps, 256)`` rows drawn from the agent's ``"act"`` generator).

    The generator's state before each recent block is kept (:meth:`state_at`), so a checkpoint can store it and
    a restart can :meth:`seek` there instead of drawing every block since the start again.

    Args:
        rng_state: the initial ``bit_generator.state`` of a freshly seeded agent's ``rngs["act"]``.
        block: rows per block. width: ``dims * bins``.
    """

    KEEP = 256  # block states kept (a learner lagging further behind stores none)

    def __init__(self, rng_state: dict, block: int, width: int):
        self._rng = np.random.Generator(np.random.PCG64())
        self._rng.bit_generator.state = rng_state
        self.block, self.width = int(block), int(width)
        self._index = -1
        self._noise = np.zeros((0, width), dtype=np.float32)
        self._states: dict[int, dict] = {}
        self._lock = threading.Lock()

    def row(self, n: int) -> np.ndarray:
        """``(dims * bins,)`` float32 noise of decision ``n`` (``n`` never decreases between calls).

        Raises:
            ValueError: if ``n`` lies in a block already passed.
        """
        b = n // self.block
        if b != self._index:
            self._advance(b)
        return self._noise[n % self.block]

    def _advance(self, b: int) -> None:
        if b < self._index:
            raise ValueError(f"acting noise of decision {b * self.block} was already passed (at block {self._index})")
        with self._lock:
            while self._index < b:
                self._states[self._index + 1] = self._rng.bit_generator.state
                self._noise = self._rng.gumbel(size=(self.block, self.width)).astype(np.float32)
                self._index += 1
            for k in [k for k in self._states if k < b - self.KEEP]:
                del self._states[k]

    def state_at(self, decisions: int) -> dict | None:
        """``{"block", "state"}``: the generator state before the block holding decision ``decisions`` (drawn on a
        copy if the acting path has not reached it), or None if it is no longer kept (safe to call from another
        thread)."""
        b = decisions // self.block
        with self._lock:
            state = self._states.get(b)
            if state is None and b > self._index:  # not drawn yet (decisions replayed since a restart): draw
                g = np.random.Generator(np.random.PCG64())  # the blocks up to it on a copy of the generator
                g.bit_generator.state = self._rng.bit_generator.state
                for _ in range(b - self._index - 1):
                    g.gumbel(size=(self.block, self.width))
                state = g.bit_generator.state
        return None if state is None else {"block": b, "state": state}

    def follow(self, decisions: int) -> None:
        """Draw blocks up to the one holding decision ``decisions`` (a copy that only serves :meth:`state_at`,
        as in a learner process: then each checkpoint draws only the blocks since the previous one)."""
        b = decisions // self.block
        if b > self._index:
            self._advance(b)

    def seek(self, saved: dict) -> None:
        """Continue from :meth:`state_at` output (the next row drawn is of block ``saved["block"]``)."""
        with self._lock:
            self._rng.bit_generator.state = saved["state"]
            self._index = int(saved["block"]) - 1
            self._states = {}


#: The learner's failure and the rollouts skipped since, in the state folder: ``{"failed": {"position": int,
#: "error": str} or null, "skipped": [{"position": int, "error": str}, ...]}`` (module docstring).
FAILURE_FILE = "learner-failure.json"
#: ``--resume-learner``: what a start does with a recorded failure (:func:`resume_failure`).
RESUME_CHOICES = ("retry", "skip")


class LearnerFailure(RuntimeError):
    """Learning from a logged record raised: the learner stops before that record for good (module docstring).

    Args:
        position: the log record whose transition the failed update (or step) was learning from.
        reason: one line, the exception's type and message (``"ValueError: advantages 1.4e+39 ..."``).
    """

    def __init__(self, position: int, reason: str):
        reason = " ".join(str(reason).splitlines())  # one line, also from a hand-edited failure file
        super().__init__(f"learning from log record {position} failed: {reason}")
        self.position, self.reason = int(position), reason


def _failure_path(state_dir: str | Path) -> Path:
    return Path(state_dir) / FAILURE_FILE


def load_failures(state_dir: str | Path) -> tuple[LearnerFailure | None, list[LearnerFailure]]:
    """The recorded failure (or None) and the skipped ones, oldest first, from ``STATE/learner-failure.json``
    (none without the file).

    Raises:
        ValueError: one line naming the file: not JSON, a repeated key, or not of :data:`FAILURE_FILE`'s form.
    """
    path = _failure_path(state_dir)
    if not path.is_file():
        return None, []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=unique_object)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON ({str(exc).splitlines()[0]})") from None

    def entry(x: Any, where: str) -> LearnerFailure:
        if not (isinstance(x, dict) and set(x) == {"position", "error"} and type(x["position"]) is int
                and x["position"] >= 0 and isinstance(x["error"], str)):
            raise ValueError(f"{path}: {where} must be {{\"position\": a record index >= 0, \"error\": a string}}, "
                             f"got {json.dumps(x)[:80]}")
        return LearnerFailure(x["position"], x["error"])

    if not (isinstance(doc, dict) and set(doc) == {"failed", "skipped"} and isinstance(doc["skipped"], list)):
        raise ValueError(f"{path} must hold {{\"failed\": null or a failure, \"skipped\": [failure, ...]}}, got "
                         f"{json.dumps(doc)[:80]}")
    failed = None if doc["failed"] is None else entry(doc["failed"], "failed")
    return failed, [entry(x, f"skipped[{k}]") for k, x in enumerate(doc["skipped"])]


def _write_failures(state_dir: str | Path, failed: LearnerFailure | None, skipped: list[LearnerFailure]) -> None:
    from lcpo.persistence.atomic import atomic_write_json

    def entry(f: LearnerFailure) -> dict:
        return {"position": f.position, "error": f.reason}

    atomic_write_json(_failure_path(state_dir), {"failed": None if failed is None else entry(failed),
                                                 "skipped": [entry(f) for f in skipped]})


def record_failure(state_dir: str | Path, failure: LearnerFailure) -> None:
    """Write ``failure`` as the state folder's learner failure (atomically; the skipped ones are kept).

    Raises:
        ValueError: the file exists and is malformed (:func:`load_failures`). OSError: it cannot be written.
    """
    _write_failures(state_dir, failure, load_failures(state_dir)[1])


def resume_failure(state_dir: str | Path, how: str) -> LearnerFailure | None:
    """Resolve a recorded failure before a start: ``"retry"`` forgets it, ``"skip"`` adds it to the skipped ones
    (the learner drops the rollout that failed at its record, at every replay). Nothing recorded: no change.

    Returns:
        The failure resolved, or None.

    Raises:
        ValueError: ``how`` is not in :data:`RESUME_CHOICES`, or the file is malformed.
    """
    if how not in RESUME_CHOICES:
        raise ValueError(f"resume_learner must be one of {', '.join(RESUME_CHOICES)}, got {how!r}")
    failed, skipped = load_failures(state_dir)
    if failed is not None:
        _write_failures(state_dir, None, skipped + [failed] if how == "skip" else skipped)
    return failed


@dataclass(frozen=True)
class Snapshot:
    """A published acting policy: ``policy.sample(obs, noise)``; ``version`` = updates applied."""

    version: int
    policy: Any


def _tr_json(tr: Transition) -> list:
    return [np.asarray(tr.obs, np.float64).tolist(), np.asarray(tr.action).tolist(), tr.reward,
            np.asarray(tr.next_obs, np.float64).tolist(), tr.terminated, tr.truncated, tr.info]


def _tr_load(d: list, spaces) -> Transition:
    return Transition(np.asarray(d[0], np.float32), spaces.action(d[1]), float(d[2]), np.asarray(d[3], np.float32),
                      bool(d[4]), bool(d[5]), d[6])


class Learner:
    """One agent learning from the log (module docstring), in a background thread or inline.

    Args:
        agent: the agent (fresh or restored).
        replica: the learner's copy of the server state, at the learner's position.
        checkpoints: a :class:`lcpo.persistence.checkpoint.RunCheckpoints`, or None (no checkpoints).
        config: the server configuration stored with each checkpoint.
        checkpoint_every: updates between checkpoints (0: only at shutdown).
        on_checkpoint: called with the position after each commit (e.g. the log's ``discard_before``).
        acting_noise: the server's acting noise, whose generator state at the learner's position each checkpoint
            also stores (``"acting_noise"``, beside the learner's state), or None.
        on_failure: called with the :class:`LearnerFailure` when learning from a record fails (e.g.
            :func:`record_failure`), or None.
        skip: positions of log records at which the learner drops the waiting rollout instead of learning from it
            (failures skipped with ``--resume-learner skip``).

    Attributes:
        error: None, or why the learner stopped: a :class:`LearnerFailure` (learning from a record failed: the
            server acts on from the last snapshot) or any other exception (the server refuses with 503).
        on_error: None, or called once with ``error`` when the learner stops on its own (after ``on_failure``;
            from the learner's thread in thread mode), e.g. to tell the operator at that moment.
    """

    def __init__(self, agent, replica: ServerState, checkpoints=None, config: dict | None = None,
                 checkpoint_every: int = 1, on_checkpoint=None, acting_noise: ActingNoise | None = None,
                 on_failure=None, skip: Iterable[int] = ()):
        self.agent, self.replica = agent, replica
        self.rollout_steps = int(agent.hp.rollout_steps)
        self.runs: dict[str, list[Transition]] = {}
        self.waiting = 0
        self.checkpoints, self.config = checkpoints, dict(config or {})
        self.checkpoint_every, self.on_checkpoint = int(checkpoint_every), on_checkpoint
        self.acting_noise = acting_noise
        self.on_failure, self.skip = on_failure, frozenset(int(x) for x in skip)
        self.last_diagnostics: dict = {}
        self.update_seconds = 0.0
        self.checkpointed_at = -1
        self.error: BaseException | None = None
        self.on_error = None
        self._since_checkpoint = 0
        self._pending: collections.deque = collections.deque()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._done = threading.Condition()
        self.snapshot = self._snapshot()
        #: records fully consumed (applied and, if they completed a rollout, learned from)
        self.consumed = replica.records

    # -- state ---------------------------------------------------------------------------------------------------
    @property
    def position(self) -> int:
        """Records consumed (the replica's record count)."""
        return self.replica.records

    @property
    def updates(self) -> int:
        """Updates applied."""
        return int(self.agent.updates)

    def _snapshot(self) -> Snapshot:
        from lcpo.agents.nets import make_fast_policy

        return Snapshot(int(self.agent.updates), make_fast_policy(copy.deepcopy(self.agent.actor)))

    def state_dict(self) -> dict:
        """Agent state, the waiting runs, the replica (JSON) and the position."""
        return {"agent": self.agent.state_dict(), "replica": self.replica.to_json(),
                "runs": [[s, [_tr_json(t) for t in run]] for s, run in self.runs.items()],
                "last_diagnostics": dict(self.last_diagnostics)}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output and republish the snapshot."""
        self.agent.load_state_dict(state["agent"])
        self.replica.load_json(state["replica"])
        self.runs = {s: [_tr_load(t, self.replica.spaces) for t in run] for s, run in state["runs"]}
        self.waiting = sum(len(r) for r in self.runs.values())
        self.last_diagnostics = dict(state.get("last_diagnostics", {}))
        self.snapshot = self._snapshot()
        self.consumed = self.replica.records

    # -- learning --------------------------------------------------------------------------------------------------
    def consume(self, rec: dict) -> None:
        """Apply one record to the replica and feed the transition it completes (module docstring).

        A step with ``reward: null`` on a stream that has a waiting run starts it afresh: the stream's next
        transition does not follow the run's last one, so that one is cut (marked truncated, unless it ended
        its episode), as at the end of a stream's run, and GAE bootstraps from its ``next_obs`` there.

        At a position in ``skip``, the transition and the runs waiting are dropped (no update).

        Raises:
            LearnerFailure: learning from the record's transition raised (:meth:`fail` was called; the
                original exception is chained).
            ValueError: a record that does not fit the replica (a corrupt or foreign log).
        """
        position = self.replica.records
        if rec.get("k") == "step" and rec.get("r") is None:
            run = self.runs.get(rec["s"])
            if run and not (run[-1].terminated or run[-1].truncated):
                run[-1] = run[-1]._replace(truncated=True)
        out = self.replica.apply(rec)
        if out is not None:
            if position in self.skip:  # the rollout whose update failed here: dropped (--resume-learner skip)
                self.runs, self.waiting = {}, 0
            else:
                try:
                    self.feed(*out)
                except Exception as exc:  # noqa: BLE001 - whatever the update raised: named, recorded, kept
                    raise self.fail(position, exc) from exc
        self.consumed = self.replica.records

    def fail(self, position: int, exc: BaseException) -> LearnerFailure:
        """Stop learning for good before log record ``position``, learning from which raised ``exc``: sets
        ``error`` and ``consumed = position`` after calling ``on_failure`` (so that a thread woken by ``error``,
        :meth:`wait_for`, finds the failure recorded). The learner then takes no further record
        and no checkpoint (its agent may hold part of the failed update); the last snapshot stays published.

        Returns:
            The :class:`LearnerFailure` (one line: the exception's type and its message's first line, at most
            300 characters).
        """
        lines = str(exc).strip().splitlines()
        reason = f"{type(exc).__name__}: {lines[0] if lines else '(no message)'}"
        failure = LearnerFailure(position, reason if len(reason) <= 300 else reason[:297] + "...")
        if self.on_failure is not None:  # recorded before it is published: whoever sees ``error`` finds the record
            self.on_failure(failure)
        self.error = failure
        self.consumed = int(position)
        if self.on_error is not None:
            self.on_error(failure)
        return failure

    def feed(self, stream: str, tr: Transition) -> bool:
        """Add one transition to its stream's run; update when ``rollout_steps`` are waiting.

        Returns:
            True if an update ran (and a new snapshot is published).
        """
        self.runs.setdefault(stream, []).append(tr)
        self.waiting += 1
        if self.waiting < self.rollout_steps:
            return False
        t0 = time.perf_counter()
        runs = list(self.runs.values())
        diag = None
        for k, run in enumerate(runs):
            last_run = k == len(runs) - 1
            for j, t in enumerate(run):
                if j == len(run) - 1 and not last_run and not (t.terminated or t.truncated):
                    t = t._replace(truncated=True)  # the cut between two streams' runs
                diag = self.agent.observe(t)
        if diag is None:
            raise RuntimeError(f"{self.agent.name} did not update after {self.rollout_steps} transitions")
        self.runs, self.waiting = {}, 0
        self.last_diagnostics = {k: float(v) for k, v in diag.items()
                                 if isinstance(v, (int, float, np.floating, np.integer))}
        self.update_seconds = time.perf_counter() - t0
        self.snapshot = self._snapshot()
        self._since_checkpoint += 1
        return True

    def maybe_checkpoint(self) -> None:
        """Commit a checkpoint if ``checkpoint_every`` updates passed since the last one."""
        if self.checkpoint_every and self._since_checkpoint >= self.checkpoint_every:
            self.checkpoint()

    def checkpoint(self) -> None:
        """Commit the learner's state at its position (atomically, :class:`RunCheckpoints`).

        Raises:
            RuntimeError: the learner failed (``error``): its state is never committed.
        """
        if self.error is not None:
            raise RuntimeError(f"the learner failed: {self.error}") from self.error
        self._since_checkpoint = 0
        if self.checkpoints is None or self.checkpointed_at == self.position:
            return
        state = self.state_dict()
        if self.acting_noise is not None:
            saved = self.acting_noise.state_at(self.replica.decisions)
            if saved is not None:
                state["acting_noise"] = saved
        self.checkpoints.commit(self.position, state, self.config)
        self.checkpointed_at = self.position
        if self.on_checkpoint is not None:
            self.on_checkpoint(self.position)

    # -- the background thread ---------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the background thread (records arrive through :meth:`submit`)."""
        self._thread = threading.Thread(target=self._run, name="lcpo-serve-learner", daemon=True)
        self._thread.start()

    def submit(self, rec: dict) -> None:
        """Queue a logged record for the background thread (a deque append; the thread is woken only when it
        sleeps, so a burst of requests costs no thread switch per request)."""
        self._pending.append(rec)
        if not self._wake.is_set():
            self._wake.set()

    @property
    def backlog(self) -> int:
        """Records queued and not yet consumed."""
        return len(self._pending)

    def _run(self) -> None:
        from lcpo.online.threads import limit_threads

        pending = self._pending
        try:
            with limit_threads(self.agent.threads):
                while True:
                    self._wake.wait()
                    self._wake.clear()
                    while pending:
                        rec = pending.popleft()
                        if rec is None:
                            return
                        self.consume(rec)
                        self.maybe_checkpoint()
                    with self._done:
                        self._done.notify_all()
                    time.sleep(0.001)  # gather the next records: one wake-up per millisecond at most
        except BaseException as exc:  # reported by /v1/status; the server then refuses requests with 503
            if self.error is None:  # (a LearnerFailure was reported by fail())
                self.error = exc
                if self.on_error is not None:
                    self.on_error(exc)
        finally:
            with self._done:
                self._done.notify_all()

    def wait_for(self, position: int, timeout: float | None = None) -> bool:
        """Block until the learner consumed ``position`` records, updates included (or failed); True if it did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._done:
            while self.consumed < position and self.error is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._done.wait(left)
        return self.consumed >= position

    def stop(self) -> None:
        """Drain the queue, stop the thread, and checkpoint.

        Raises:
            RuntimeError: if the learner failed (its error chained).
        """
        if self._thread is not None:
            self.submit(None)
            self._thread.join()
            self._thread = None
        if self.error is not None:
            raise RuntimeError(f"the learner failed: {self.error}") from self.error
        self.checkpoint()


def finite(x: float) -> float | None:
    """``x`` or None when not finite (JSON has no NaN)."""
    return x if math.isfinite(x) else None
