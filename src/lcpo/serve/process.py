"""The learner in its own process (``lcpo serve --learn process``): an update's Python code never competes with
the acting path for the server's interpreter.

**What crosses between the processes.**

* *Records*: none. The learner process reads them from the append-only log itself
  (:class:`lcpo.serve.log.LogReader`), in log order, so learning stays a function of the log. The server only
  tells it how many records are completely written: a shared 64-bit counter (``multiprocessing.RawValue``),
  set after each append, before the answer is sent. The learner never reads past it, so a record whose write
  failed (and was cut off again) is never learned from.
* *Snapshots*: after each update the learner sends ``("snapshot", version, arrays, status)`` on a
  ``multiprocessing.Pipe``, where ``arrays`` are the actor's parameters (name -> float32 NumPy array, the
  state dict's tensors). A receiver thread in the server loads them into a copy of its own actor and builds the
  NumPy acting mirror (:func:`lcpo.agents.nets.make_fast_policy`), which requests then read. That costs the
  server one receive and a small copy per update, not per decision.
* *Status*: the learner's position, updates, waiting transitions, checkpoint position and last diagnostics,
  sent at most every 0.1 s while it moves, with every snapshot, and on request (:meth:`ProcessLearner.wait_for`).
* *Control*: ``("stop", records)`` (drain to that record, checkpoint, answer ``("stopped", status)`` and exit)
  and ``("report", position)`` (send a status once the learner has consumed ``position`` records).
* *Failure*: when learning from a record raises, the learner records it in ``STATE/learner-failure.json``
  (:mod:`lcpo.serve.learner`, "A record the learner fails on"), sends ``("failed", position, reason)`` and exits
  1; the server then acts on from the last snapshot. Any other error is sent as ``("error", message)`` before the
  exit, and the server answers 503 from then on. The ``failed`` message also carries the learner's last status
  (so ``/v1/status`` shows the last checkpoint it committed), and the server reaps the process as soon as it
  exits (``learner_pid`` is then null); if it dies without a word (``kill -9``), the server reads the checkpoint
  position from ``checkpoint/latest.json``.

The pipe is an anonymous socket pair shared only by the server and the process it spawned; its messages are
pickled by :mod:`multiprocessing` (nothing from a client ever travels on it).

**Lifetime.** The process is started with the ``spawn`` method (a fresh interpreter, no inherited threads or
locks; it is a direct child of the server, which ``forkserver`` would not give). It dies with the server:

* on Linux it asks the kernel for ``SIGKILL`` when its parent exits (``prctl(PR_SET_PDEATHSIG)``), and checks
  right after that its parent is still the server (the server may have died before the request). The kernel
  ties that signal to the *thread* that started the process: build the server on a thread that outlives it
  (the CLI: the main thread);
* on every platform it checks its parent id at least every 20 ms while idle, and after every batch of
  records, and exits if the server is gone;
* it ignores ``SIGINT`` and ``SIGTERM``: Ctrl-C, and a service manager's SIGTERM, reach the whole process
  group, and the server then drains the learner with ``stop`` (a clean exit 0 with the final checkpoint). A
  server on its main thread ignores both for the instant it takes to start the process, so that the child
  ignores them from its first instruction (an ignored signal stays ignored across fork and exec), not only
  once its imports are done;
* if the server's interpreter exits without having stopped it (an error path), an ``atexit`` hook of the
  server kills it (the log holds everything; the next start replays it).

It lowers its own CPU priority by ``cfg.learner_nice`` (default 10): when the cores are contended, the acting
path runs first and the learner lags, rather than the answers.

It holds ``STATE/.learner.lock`` (``flock``) while it lives. A server starting on the same ``--state`` first
waits for that lock to be free (:func:`wait_learner_gone`), so a learner left from a killed server can never
commit a checkpoint or delete log segments under its successor.

A program that builds a process-mode server itself needs the ``if __name__ == "__main__":`` guard that every
``spawn`` start needs (the child imports the program's main module).

**Checkpoints** are committed by the learner process, exactly as the thread learner does (the same
:class:`~lcpo.serve.learner.Learner` code, with its own copy of the acting noise generator to store the noise
state at its position), and it deletes the log segments a checkpoint covers (unless ``keep_log``).
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import sys
import threading
import time
from pathlib import Path

from lcpo.serve.learner import Learner, LearnerFailure, Snapshot

__all__ = ["LEARNER_LOCK", "ProcessLearner", "wait_learner_gone"]

#: the lock file a learner process holds in the state folder while it lives
LEARNER_LOCK = ".learner.lock"
#: seconds between status messages while the learner's position moves
STATUS_EVERY_S = 0.1
#: seconds the idle learner waits for a message before it looks at the counter again: IDLE_S after work, growing
#: to IDLE_MAX_S while nothing arrives (a control message ends the wait at once)
IDLE_S, IDLE_MAX_S = 0.004, 0.02
#: records consumed between two looks at the control pipe
BATCH = 1024
#: signals a service manager or a terminal sends to the whole process group; the learner ignores them
_GROUP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _lock_file(state_dir: str | Path, blocking_s: float):
    """Open ``STATE/.learner.lock`` and ``flock`` it exclusively, retrying for up to ``blocking_s`` seconds;
    returns the open file (the lock lives as long as it), or raises ``RunFolderBusy``."""
    import fcntl

    from lcpo.persistence.runlock import RunFolderBusy

    path = Path(state_dir) / LEARNER_LOCK
    fh = open(path, "a+")  # noqa: SIM115 - the caller keeps or closes it
    deadline = time.monotonic() + blocking_s
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fh
        except OSError:
            if time.monotonic() >= deadline:
                fh.close()
                raise RunFolderBusy(f"a learner process still holds {path} after {blocking_s:g} s; stop it "
                                    "before starting a server on this --state") from None
            time.sleep(0.02)


def wait_learner_gone(state_dir: str | Path, timeout_s: float = 60.0) -> None:
    """Block until no learner process holds ``STATE/.learner.lock`` (a learner of a killed server exits within
    milliseconds of it).

    Raises:
        RunFolderBusy: the lock is still held after ``timeout_s`` seconds.
    """
    _lock_file(state_dir, timeout_s).close()


def _die_with_parent(ppid: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG: SIGKILL when the parent exits
        except (OSError, AttributeError):  # no prctl here: the parent-id checks in the loop remain
            pass
    if os.getppid() != ppid:  # the server died before the request above
        os._exit(1)


def _actor_arrays(agent) -> dict:
    return {k: v.detach().cpu().numpy().copy() for k, v in agent.actor.state_dict().items()}


class _ProcessSideLearner(Learner):
    """The thread learner's code in the learner process: snapshots are sent, not built, and each checkpoint
    draws its own copy of the acting noise up to the learner's position first."""

    def __init__(self, *args, publish, published: int, **kw):
        self._publish, self._published = publish, published
        super().__init__(*args, **kw)

    def _snapshot(self) -> Snapshot:
        version = int(self.agent.updates)
        if version != self._published:
            self._published = version
            self._publish(version, _actor_arrays(self.agent))
        return Snapshot(version, None)

    def checkpoint(self) -> None:
        if self.acting_noise is not None:
            self.acting_noise.follow(self.replica.decisions)
        super().checkpoint()


def _learner_main(cfg, position: int, version: int, acked, conn, ppid: int, skip: tuple = ()) -> None:
    """The learner process (module docstring). Exits 0 after a ``stop``, 1 after an error (sent first: a
    :class:`~lcpo.serve.learner.LearnerFailure` as ``("failed", position, reason)``, once recorded in the state
    folder; anything else as ``("error", message)``)."""
    _die_with_parent(ppid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a signal to the whole group: the server drains the learner
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if cfg.learner_nice:
        os.nice(cfg.learner_nice)  # under contention the acting path runs first
    try:
        lock = _lock_file(cfg.state_dir, 60.0)
        try:
            _learn(cfg, position, version, acked, conn, ppid, skip)
        finally:
            lock.close()
    except LearnerFailure as exc:  # recorded by the learner; the server acts on from the last snapshot
        try:
            conn.send(("failed", exc.position, exc.reason, getattr(exc, "status", None)))
        except OSError:
            pass
        sys.exit(1)
    except BaseException as exc:  # noqa: BLE001 - reported to the server, which answers 503 from then on
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except OSError:
            pass
        sys.exit(1)


@contextlib.contextmanager
def _final_status(status):
    """A :class:`LearnerFailure` raised inside leaves with the learner's last status (``exc.status``: checkpoint
    position, updates, waiting), which the ``("failed", ...)`` message carries to the server."""
    try:
        yield
    except LearnerFailure as exc:
        exc.status = status()
        raise


def _learn(cfg, position: int, version: int, acked, conn, ppid: int, skip: tuple) -> None:
    from functools import partial

    from lcpo.online.threads import limit_threads
    from lcpo.persistence.checkpoint import RunCheckpoints
    from lcpo.serve.app import _env_of
    from lcpo.serve.learner import ActingNoise, build_agent, record_failure
    from lcpo.serve.log import LogReader, discard_segments
    from lcpo.serve.protocol import Limits, ServerState, Spaces

    state_dir = Path(cfg.state_dir)
    env = _env_of(cfg)
    agent = build_agent(env, cfg.agent, cfg.seed, cfg.overrides)
    spaces = Spaces(env.observation_space, env.action_space)
    noise = ActingNoise(agent.rngs["act"].bit_generator.state, max(agent.hp.rollout_steps, 256),
                        agent.action_dims * agent.action_bins)
    ckpts = RunCheckpoints(state_dir / "checkpoint")
    holder: list = []

    def status() -> dict:
        lr = holder[0]
        return {"position": lr.position, "updates": lr.updates, "waiting": lr.waiting,
                "checkpointed_at": lr.checkpointed_at, "update_seconds": lr.update_seconds,
                "last_diagnostics": dict(lr.last_diagnostics), "pid": os.getpid()}

    def publish(v: int, arrays: dict) -> None:
        if holder:
            conn.send(("snapshot", v, arrays, status()))

    learner = _ProcessSideLearner(agent, ServerState(spaces, Limits(cfg.max_streams, cfg.max_outstanding)), ckpts,
                                  cfg.fixed(), cfg.checkpoint_every,
                                  on_checkpoint=None if cfg.keep_log else partial(discard_segments, state_dir / "log"),
                                  acting_noise=noise, publish=publish, published=version,
                                  on_failure=partial(record_failure, state_dir), skip=skip)
    if ckpts.latest() is not None:
        _, st = ckpts.load()
        learner.load_state_dict(st)
        if "acting_noise" in st:
            noise.seek(st["acting_noise"])
        learner.checkpointed_at = learner.position
    if learner.position != position or learner.updates != version:
        raise RuntimeError(f"the checkpoint moved while the server started (the server loaded record {position}, "
                           f"update {version}; the learner found record {learner.position}, update "
                           f"{learner.updates})")
    holder.append(learner)
    reader = LogReader(state_dir / "log", position)
    conn.send(("status", status()))
    report_at, sent_at, sent_position = None, time.monotonic(), position
    idle = IDLE_S

    def consume_to(limit: int) -> None:
        for rec in reader.read(min(limit, learner.position + BATCH)):
            learner.consume(rec)
            learner.maybe_checkpoint()

    with limit_threads(agent.threads), _final_status(status):
        while True:
            n = acked.value
            busy = n > learner.position
            if busy:
                consume_to(n)
            now = time.monotonic()
            if (report_at is not None and learner.position >= report_at) or (
                    learner.position != sent_position and now - sent_at >= STATUS_EVERY_S):
                conn.send(("status", status()))
                report_at, sent_at, sent_position = None, now, learner.position
            idle = IDLE_S if busy else min(idle * 1.5, IDLE_MAX_S)
            if conn.poll(0 if busy else idle):
                msg = conn.recv()
                if msg[0] == "stop":
                    target = int(msg[1])
                    while learner.position < target:
                        before = learner.position
                        consume_to(target)
                        if learner.position == before:  # written but not visible yet: look again shortly
                            time.sleep(IDLE_S)
                            if os.getppid() != ppid:
                                os._exit(1)
                    learner.checkpoint()
                    conn.send(("stopped", status()))
                    return
                if msg[0] == "report":
                    report_at = int(msg[1])
            if os.getppid() != ppid:  # the server is gone (where PR_SET_PDEATHSIG is not available)
                os._exit(1)


class ProcessLearner:
    """The server's side of a learner process: the same attributes the server reads from a thread
    :class:`~lcpo.serve.learner.Learner` (``snapshot``, ``updates``, ``consumed``, ``waiting``,
    ``rollout_steps``, ``checkpointed_at``, ``update_seconds``, ``last_diagnostics``, ``error``), plus
    :meth:`submit`, :meth:`wait_for` and :meth:`stop`.

    Args:
        cfg: the server's :class:`~lcpo.serve.app.ServeConfig` (the process builds the same agent from it).
        local: a :class:`Learner` in the server, at the committed checkpoint's position (fresh, or restored
            from the checkpoint): its snapshot is served until the first update, and its actor is the template
            snapshots are loaded into. It is never fed.
        written: records in the log now (the counter's start; the learner replays those past ``local``).

    Raises:
        OSError: the process or the pipe could not be created.
    """

    def __init__(self, cfg, local: Learner, written: int):
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self._template = local.agent.actor
        self.snapshot: Snapshot = local.snapshot
        self.rollout_steps = local.rollout_steps
        self.updates, self.consumed, self.waiting = local.updates, local.position, local.waiting
        self.checkpointed_at, self.update_seconds = local.checkpointed_at, 0.0
        self.last_diagnostics = dict(local.last_diagnostics)
        self.error: BaseException | None = None
        #: True once the process has built its agent, loaded the checkpoint and started reading the log
        self.ready = False
        self._acked = ctx.RawValue("q", int(written))
        self._conn, child = ctx.Pipe(duplex=True)
        self._done = threading.Condition()
        self._stopped = False
        self.process = ctx.Process(target=_learner_main, name="lcpo-serve-learner", daemon=True,
                                   args=(cfg, local.position, local.updates, self._acked, child, os.getpid(),
                                         tuple(sorted(local.skip))))
        # an ignored signal stays ignored across fork and exec: the child ignores the group's SIGINT/SIGTERM from
        # its first instruction on, not only once its imports are done (only the main thread may set handlers)
        try:
            old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _GROUP_SIGNALS}
        except ValueError:  # not the main thread: the child ignores them once it has started
            old = {}
        try:
            self.process.start()
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)
        child.close()
        #: the learner process's id while it lives; None once it has exited and been reaped
        self.pid = self.process.pid
        #: called once with ``error`` when the learner stops on its own (from the receiver thread)
        self.on_error = local.on_error
        self._checkpoints = Path(cfg.state_dir) / "checkpoint"
        self._receiver = threading.Thread(target=self._receive, name="lcpo-serve-learner-pipe", daemon=True)
        self._receiver.start()
        import atexit

        atexit.register(self._kill)  # runs before multiprocessing's own exit hook, which would SIGTERM and wait

    def _kill(self) -> None:
        process = self.process
        if process is not None and process.is_alive():
            process.kill()
            process.join(10)

    # -- the acting path -------------------------------------------------------------------------------------------
    def submit(self, rec: dict) -> None:
        """Tell the learner that the log holds records up to ``rec["#"]`` (one store to shared memory)."""
        self._acked.value = rec["#"] + 1

    @property
    def backlog(self) -> int:
        """Records written and not yet consumed, as of the learner's last status."""
        return self._acked.value - self.consumed

    # -- messages from the learner -------------------------------------------------------------------------------------
    def _build(self, version: int, arrays: dict) -> Snapshot:
        import torch

        from lcpo.agents.nets import make_fast_policy

        actor = copy.deepcopy(self._template)
        with torch.no_grad():
            for k, t in actor.state_dict().items():
                t.copy_(torch.from_numpy(arrays[k]))
        return Snapshot(int(version), make_fast_policy(actor))

    def _take(self, st: dict) -> None:
        self.ready = True
        self.consumed, self.updates, self.waiting = st["position"], st["updates"], st["waiting"]
        self.checkpointed_at, self.update_seconds = st["checkpointed_at"], st["update_seconds"]
        self.last_diagnostics = st["last_diagnostics"]

    def _reap(self, process) -> None:
        """Wait for the exiting learner process (no zombie left) and report no pid once it is gone."""
        process.join(5)
        if not process.is_alive():
            self.pid = None

    def _receive(self) -> None:
        process = self.process
        while True:
            try:
                msg = self._conn.recv()
            except (EOFError, OSError):
                died = None
                if not self._stopped and self.error is None:
                    self._reap(process)
                    died = RuntimeError(f"the learner process exited (exit code {process.exitcode})")
                    try:  # its last checkpoint may be newer than its last status
                        from lcpo.persistence.checkpoint import RunCheckpoints

                        latest = RunCheckpoints(self._checkpoints).latest()
                        if latest is not None:
                            self.checkpointed_at = max(self.checkpointed_at, int(latest.step))
                    except (OSError, ValueError):
                        pass
                with self._done:
                    if died is not None:
                        self.error = died
                    self._done.notify_all()
                if died is not None and self.on_error is not None:
                    self.on_error(died)
                return
            kind = msg[0]
            if kind in ("failed", "error"):  # the process exits right after: reaped before the error shows
                self._reap(process)
            with self._done:
                if kind == "snapshot":
                    self.snapshot = self._build(msg[1], msg[2])
                    self._take(msg[3])
                elif kind in ("status", "stopped"):
                    self._take(msg[1])
                    self._stopped = self._stopped or kind == "stopped"
                elif kind == "failed":  # learning from record msg[1] failed: recorded in the state folder
                    if len(msg) > 3 and msg[3] is not None:
                        self._take(msg[3])
                    self.error = LearnerFailure(msg[1], msg[2])
                    self.consumed = msg[1]
                elif kind == "error":
                    self.error = RuntimeError(msg[1])
                self._done.notify_all()
            if kind in ("failed", "error") and self.on_error is not None:
                self.on_error(self.error)
            if kind == "stopped":
                return

    # -- waiting and stopping --------------------------------------------------------------------------------------
    def wait_for(self, position: int, timeout: float | None = None) -> bool:
        """Block until the learner consumed ``position`` records, updates included (or failed); True if it did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self._conn.send(("report", int(position)))
        except OSError:
            pass
        with self._done:
            while self.consumed < position and self.error is None and not self._stopped:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._done.wait(0.5 if left is None else min(left, 0.5))
        return self.consumed >= position

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the process has built its agent, loaded the checkpoint and reported (or failed); True if
        it is ready."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._done:
            while not self.ready and self.error is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._done.wait(0.5 if left is None else min(left, 0.5))
        return self.ready

    def stop(self) -> None:
        """Let the learner consume every record written, checkpoint, and exit; wait for it.

        Raises:
            RuntimeError: if the learner failed (its error chained).
        """
        if self.process is None:
            return
        if self.error is None and not self._stopped:
            try:
                self._conn.send(("stop", self._acked.value))
            except OSError:
                pass
            with self._done:
                while not self._stopped and self.error is None:
                    self._done.wait(0.5)
        self._receiver.join(10)
        self.process.join(30)
        if self.process.is_alive():  # never seen; do not leave it behind
            self.process.kill()
            self.process.join()
        self._conn.close()
        self.process = None
        import atexit

        atexit.unregister(self._kill)
        if self.error is not None:
            raise RuntimeError(f"the learner failed: {self.error}") from self.error

