"""``lcpo serve``'s HTTP/JSON application (Starlette on uvicorn) and the server object behind it.

Endpoints (schema at ``GET /openapi.json``; protocol rules in :mod:`lcpo.serve.protocol`):

``POST /v1/step``     ``{"stream", "obs", "reward", "terminated", "truncated", ["final_obs"], ["info"]}`` ->
                      ``{"action", "decision", "policy_version"}``
``POST /v1/act``      ``{"stream", "obs"}`` -> ``{"action", "decision", "policy_version"}``
``POST /v1/observe``  ``{"decision", "reward", "next_obs", "terminated", "truncated", ["info"]}`` ->
                      ``{"steps", "policy_version"}``
``POST /v1/batch``    ``{"steps": [step, ...]}`` -> ``{"results": [answer or error, ...]}`` (many streams, one request)
``GET /v1/status``    counters, learner state, last update diagnostics
``GET /metrics``      the same in Prometheus text format

Every accepted request is one log record, written (:mod:`lcpo.serve.log`) before the answer is sent; a refused
request (4xx, ``{"error": message, "field": name}``) writes and changes nothing. Requests are handled one at a
time on the event loop (each handler's work after reading the body is synchronous), so the log order is the
order the state changed in.

Why Starlette rather than FastAPI: the protocol's validation needs to name the exact bad entry (``obs[3]``),
check a request against the stream's state (unknown or already observed decisions) and stay on the
microsecond budget of one decision, which plain functions do more directly than pydantic models and
dependency injection; the price is a hand-written OpenAPI schema (:data:`OPENAPI`).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from lcpo.serve.protocol import (DuplicateKeyError, Limits, RequestError, ServerState, Spaces, batch_entry,
                                  batch_steps, decision_id, dumps, loads, show, unique_object)

__all__ = ["ServeConfig", "Server", "create_app", "OPENAPI", "ConfigMismatch", "LEARN_MODES"]

#: where the learner runs: its own process, a thread of the server, or inline in the request that completes a
#: rollout (ServeConfig.learn)
LEARN_MODES = ("process", "thread", "inline")


class ConfigMismatch(ValueError):
    """``--state`` holds a server started with another configuration (names the differing key)."""


@dataclass
class ServeConfig:
    """Everything a server is started with (the first five keys are fixed for a state folder).

    Attributes:
        agent: agent name (:data:`lcpo.serve.learner.SUPPORTED`).
        env: environment id, or None with ``spec``.
        spec: a spec document (:mod:`lcpo.serve.spec`), or None with ``env``.
        seed: run seed (network initialisation, acting noise).
        overrides: agent hyperparameter overrides.
        env_kwargs: environment arguments.
        state_dir: the state folder (log, checkpoints, ``serve.json``).
        fsync: ``always``, ``interval`` or ``never`` (:mod:`lcpo.serve.log`).
        fsync_interval_s: period of the background sync under ``interval``.
        checkpoint_every: updates between checkpoints (0: only at shutdown).
        learn: ``process`` (the learner in its own process, :mod:`lcpo.serve.process`), ``thread`` (a thread
            of the server; ``background`` is its former name): acting never waits for learning; or ``inline``
            (each request waits for the update it triggers: bit-exact with in-process ``learn``, for tests and
            reproducibility).
        keep_log: keep log segments a checkpoint already covers.
        max_body: largest accepted request body in bytes.
        max_streams: streams held at once. max_outstanding: outstanding decisions per stream.
        token: bearer token every request must carry, or None (loopback only).
        segment_bytes: log segment size.
        learner_nice: with ``learn="process"``, the niceness the learner process adds to its own (``os.nice``;
            0-19): under CPU contention the acting path then runs first and the learner lags (``records -
            learner_position`` in ``/v1/status``, ``lcpo_serve_learner_lag_records`` in ``/metrics``) rather
            than the answers.
        resume_learner: None, or what to do with a learner failure recorded in the state folder
            (:mod:`lcpo.serve.learner`, "A record the learner fails on"): ``"retry"`` (forget it: learn from
            that record again, e.g. after a fix) or ``"skip"`` (drop the rollout whose update failed and learn on).
            Without it a recorded failure stays: the server acts from the last good policy and does not learn.
    """

    agent: str
    env: str | None = None
    spec: dict | None = None
    seed: int = 0
    overrides: dict = field(default_factory=dict)
    env_kwargs: dict = field(default_factory=dict)
    state_dir: str = "serve-state"
    fsync: str = "interval"
    fsync_interval_s: float = 0.05
    checkpoint_every: int = 1
    learn: str = "thread"
    keep_log: bool = False
    max_body: int = 65536
    max_streams: int = 10_000
    max_outstanding: int = 1024
    token: str | None = None
    segment_bytes: int = 64 << 20
    learner_nice: int = 10
    resume_learner: str | None = None

    FIXED = ("agent", "env", "spec", "seed", "overrides", "env_kwargs")

    def fixed(self) -> dict:
        """The keys a state folder is bound to (JSON)."""
        d = asdict(self)
        return {k: d[k] for k in self.FIXED}


class _StateLock:
    """One server per state folder: ``fcntl.flock`` on ``STATE/.lock`` (freed by the kernel if the holder
    dies); unlike :class:`lcpo.persistence.runlock.RunLock` it may be released from another thread (uvicorn's
    lifespan shutdown).

    Raises:
        RunFolderBusy: another process holds the folder (names the folder and the holder's pid).
    """

    def __init__(self, folder: Path):
        import fcntl
        import os

        from lcpo.persistence.runlock import RunFolderBusy

        path = folder / ".lock"
        self._fh = open(path, "a+")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._fh.seek(0)
            holder = self._fh.read().strip() or "another process"
            self._fh.close()
            raise RunFolderBusy(f"state folder {folder} is in use by {holder} (lock {path}); stop that server or "
                                "use another --state") from None
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.write(f"pid {os.getpid()}\n")
        self._fh.flush()

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _env_of(cfg: ServeConfig):
    if (cfg.env is None) == (cfg.spec is None):
        raise ValueError("give exactly one of --env ID and --spec FILE")
    if cfg.spec is not None:
        from lcpo.serve.spec import spec_env

        return spec_env(cfg.spec)
    import lcpo.envs  # noqa: F401  (registers the lcpo ids)
    from lcpo.envs.registration import make_env

    return make_env(cfg.env, **cfg.env_kwargs)


class Server:
    """The serving state: validation, acting from snapshots, the log, the learner (module docstring).

    Args:
        cfg: the configuration.
        say: None, or called with one line for the operator when the learner stops while the server runs (a
            failure on a record, or its process dying), once per failure, from the thread that noticed it.

    Raises:
        ValueError: a bad configuration (named), a state folder started with another configuration
            (:class:`ConfigMismatch`), a corrupt log or checkpoint (:class:`~lcpo.serve.log.LogError`,
            :class:`~lcpo.persistence.checkpoint.CheckpointError`), a malformed ``serve.json`` or
            ``learner-failure.json``, or a failure recorded outside the log records after the checkpoint.
        RunFolderBusy: another server holds the state folder.
    """

    def __init__(self, cfg: ServeConfig, say=None):
        from lcpo.persistence.atomic import atomic_write_json
        from lcpo.persistence.checkpoint import RunCheckpoints
        from lcpo.serve.learner import (FAILURE_FILE, RESUME_CHOICES, ActingNoise, Learner, LearnerFailure, build_agent,
                                        load_failures, record_failure, resume_failure)
        from lcpo.serve.log import TransitionLog

        if cfg.learn == "background":  # the thread mode's former name
            cfg.learn = "thread"
        if cfg.learn not in LEARN_MODES:
            raise ValueError(f"learn must be one of {', '.join(LEARN_MODES)}, got {cfg.learn!r}")
        if not (isinstance(cfg.learner_nice, int) and 0 <= cfg.learner_nice <= 19):
            raise ValueError(f"learner_nice must be an int in [0, 19], got {cfg.learner_nice!r}")
        if cfg.resume_learner is not None and cfg.resume_learner not in RESUME_CHOICES:
            raise ValueError(f"resume_learner must be one of {', '.join(RESUME_CHOICES)}, got {cfg.resume_learner!r}")
        self.cfg = cfg
        self.say = say
        #: the last learner error told through ``say``
        self.reported: BaseException | None = None
        #: the failure read from the state folder's failure file and kept (the learner stopped before it, without
        #: failing again in this process); None otherwise
        self.restored_failure: BaseException | None = None
        self.started = time.time()
        state_dir = Path(cfg.state_dir)
        if state_dir.exists() and not state_dir.is_dir():
            raise ValueError(f"state folder {state_dir} is a file; give a folder (made if missing)")
        # before the folder: an unknown agent, env or hyperparameter is named as such and leaves no folder behind,
        # also where the folder was started with another configuration
        env = _env_of(cfg)
        agent = build_agent(env, cfg.agent, cfg.seed, cfg.overrides)
        state_dir.mkdir(parents=True, exist_ok=True)
        self._lock = _StateLock(state_dir)
        try:
            from lcpo.serve.process import wait_learner_gone

            wait_learner_gone(state_dir)  # a learner process of a killed server: gone before the checkpoint is read
            meta = state_dir / "serve.json"
            if meta.is_file():
                try:
                    old = json.loads(meta.read_text(), object_pairs_hook=unique_object)
                except ValueError as exc:  # a hand-edited file: not JSON, or a key given twice
                    raise ValueError(f"{meta} is not a valid configuration ({str(exc).splitlines()[0]})") from None
                for k in ServeConfig.FIXED:
                    if old.get(k) != cfg.fixed()[k]:
                        raise ConfigMismatch(f"{state_dir} was started with {k}={show(old.get(k), 200)}, not "
                                             f"{show(cfg.fixed()[k], 200)}; use another --state folder")
            #: the failure resolved by cfg.resume_learner at this start, or None
            self.resumed = None if cfg.resume_learner is None else resume_failure(state_dir, cfg.resume_learner)
            failed, skipped = load_failures(state_dir)
            #: log positions of the rollouts skipped after failures (--resume-learner skip)
            self.skipped = [f.position for f in skipped]
            self.env, self.agent_name = env, cfg.agent
            self.spaces = Spaces(env.observation_space, env.action_space)
            limits = Limits(cfg.max_streams, cfg.max_outstanding)
            noise_state = agent.rngs["act"].bit_generator.state
            self.noise = ActingNoise(noise_state, max(agent.hp.rollout_steps, 256), agent.action_dims * agent.action_bins)
            self.log = TransitionLog(state_dir / "log", cfg.fsync, cfg.fsync_interval_s, cfg.segment_bytes)
            ckpts = RunCheckpoints(state_dir / "checkpoint")
            self.learner = Learner(agent, ServerState(self.spaces, limits), ckpts, cfg.fixed(), cfg.checkpoint_every,
                                   on_checkpoint=None if cfg.keep_log else self.log.discard_before,
                                   acting_noise=self.noise, on_failure=partial(record_failure, state_dir),
                                   skip=self.skipped)
            self.learner.on_error = self._learner_stopped
            if ckpts.latest() is not None:
                _, st = ckpts.load()
                self.learner.load_state_dict(st)
                if "acting_noise" in st:
                    self.noise.seek(st["acting_noise"])
                self.learner.checkpointed_at = self.learner.position
            records = self.log.open(self.learner.position)
            if not meta.is_file():
                atomic_write_json(meta, cfg.fixed())
            self.state = ServerState(self.spaces, limits)
            self.state.load_json(self.learner.replica.to_json())
            for rec in records:
                self.state.apply(rec, transitions=False)
            self.replayed = len(records)
            self.inline = cfg.learn == "inline"
            if failed is not None:  # the learner as it was before the failure, in every mode; it learns no further
                start = self.learner.position
                if not start <= failed.position < self.log.next_index:
                    raise ValueError(f"{state_dir / FAILURE_FILE} records a learner failure at log record "
                                     f"{failed.position}, outside the records after the checkpoint ({start} to "
                                     f"{self.log.next_index - 1}); a folder put together from different runs?")
                try:
                    for rec in records[:failed.position - start]:
                        self.learner.consume(rec)
                except LearnerFailure:  # an earlier record fails (a hand-edited file): that one is now recorded
                    pass
                else:
                    self.learner.error = self.restored_failure = failed
            elif self.inline:
                for rec in records:
                    try:
                        self.learner.consume(rec)
                    except LearnerFailure:  # recorded: the server acts from the last good policy
                        break
                    self.learner.maybe_checkpoint()
            elif cfg.learn == "process":  # it replays the records after the checkpoint from the log itself
                from lcpo.serve.process import ProcessLearner

                self.learner = ProcessLearner(cfg, self.learner, self.log.next_index)
            else:
                self.learner.start()
                for rec in records:
                    self.learner.submit(rec)
        except BaseException:
            if getattr(self, "log", None) is not None:
                self.log.close()
            self._lock.release()
            raise
        self.failed: str | None = None
        self.counts = {"accepted": 0, "refused": 0}
        self.closed = False
        self.close_error: BaseException | None = None

    def _learner_stopped(self, error: BaseException) -> None:
        """Tell the operator (``say``) that the learner stopped: on a record (acting goes on) or otherwise (503)."""
        from lcpo.serve.learner import LearnerFailure

        self.reported = error
        if self.say is None:
            return
        if isinstance(error, LearnerFailure):
            line = (f"lcpo serve: the learner failed at log record {error.position}: {error.reason}; serving the "
                    f"last good policy (version {self.learner.snapshot.version}); see /v1/status, restart with "
                    "--resume-learner skip or retry (docs/serving.md)")
        else:
            line = (f"lcpo serve: the learner stopped: {' '.join(str(error).splitlines())}; requests are refused "
                    "with 503 (see /v1/status); a restart on the same --state replays the log")
        self.say(line)

    # -- requests (synchronous: called from the event loop, one at a time) ---------------------------------------
    def _check_alive(self) -> None:
        from lcpo.serve.learner import LearnerFailure

        if self.failed:
            raise RequestError(503, f"the server stopped accepting requests: {self.failed}")
        error = self.learner.error
        if error is not None and not isinstance(error, LearnerFailure):  # a failure on a record: acting goes on
            raise RequestError(503, f"the learner failed: {error}")

    def _decide(self, rec: dict) -> dict:
        snap = self.learner.snapshot
        n = self.state.decisions
        a = snap.policy.sample(rec["o"], self.noise.row(n))
        rec["a"] = int(a[0]) if self.spaces.discrete else [int(x) for x in a]
        rec["v"] = snap.version
        return {"action": rec["a"], "decision": decision_id(n), "policy_version": snap.version}

    def _commit(self, rec: dict, fed: bool = False, feed_error: Exception | None = None) -> None:
        """Log ``rec``, apply it, and hand it to the learner. ``fed``: (inline) the learner already learned from
        its transition; ``feed_error``: (inline) learning from it raised this."""
        from lcpo.serve.learner import LearnerFailure

        try:
            self.log.append(rec)
        except OSError as exc:
            if fed:  # the learner already holds this transition: its state no longer follows the log
                self.failed = f"log write failed after learning from it ({exc})"
                self.learner.error = feed_error or RuntimeError(self.failed)  # so it is never checkpointed
            raise RequestError(503, f"the log write failed ({exc}); the request was not accepted") from None
        self.state.apply(rec, transitions=False)
        if isinstance(self.learner.error, LearnerFailure):
            pass  # it failed on an earlier record and learns from none after it (the log keeps them all)
        elif feed_error is not None:
            self.learner.fail(rec["#"], feed_error)  # recorded now that the record is in the log
        elif self.inline:
            try:
                if fed:
                    self.learner.replica.apply(rec)
                    self.learner.consumed = self.learner.position
                else:
                    self.learner.consume(rec)
            except LearnerFailure:
                pass  # recorded; the answer stands, from the last good policy
            else:
                self.learner.maybe_checkpoint()
        else:
            self.learner.submit(rec)
        self.counts["accepted"] += 1

    def step(self, body: Any) -> dict:
        """Handle ``/v1/step`` (see :mod:`lcpo.serve.protocol`). Raises :class:`RequestError`."""
        self._check_alive()
        rec = self.state.check_step(body)
        fed, feed_error = False, None
        if self.inline and self.learner.error is None:  # (a new record: never at a skipped position, all in the log)
            out = self.state.peek(rec)
            if out is not None:
                fed = True
                try:
                    self.learner.feed(*out)
                except Exception as exc:  # noqa: BLE001 - the update failed: recorded once the record is logged
                    feed_error = exc
        answer = self._decide(rec)  # from the last good policy if the update failed
        self._commit(rec, fed, feed_error)
        return answer

    def act(self, body: Any) -> dict:
        """Handle ``/v1/act``. Raises :class:`RequestError`."""
        self._check_alive()
        rec = self.state.check_act(body)
        answer = self._decide(rec)
        self._commit(rec)
        return answer

    def observe(self, body: Any) -> dict:
        """Handle ``/v1/observe``. Raises :class:`RequestError`."""
        self._check_alive()
        rec = self.state.check_observe(body)
        self._commit(rec)
        return {"steps": self.state.transitions, "policy_version": self.learner.snapshot.version}

    def batch(self, body: Any) -> dict:
        """Handle ``/v1/batch``: ``{"steps": [step body, ...]}`` (up to 1,024), applied in order, each exactly as
        one ``/v1/step``; answers ``{"results": [...]}`` with, per step, its answer or ``{"error", "field",
        "status"}`` (a refused step changes nothing; the others are unaffected).

        An entry that is not a JSON object is refused alone like any bad step: ``{"error": "steps[3] must be a JSON
        object (a step body), got array", "field": "steps[3]", "status": 422}``.

        Raises:
            RequestError: as :func:`lcpo.serve.protocol.batch_steps`: 400 (field ``body``) when the body is not a
                JSON object; 422 when ``steps`` is missing, not a list, empty or too long, or the body has keys
                besides ``steps`` (all listed, the first named as the field).
        """
        results = []
        for k, item in enumerate(batch_steps(body)):
            try:
                results.append(self.step(batch_entry(k, item)))
            except RequestError as exc:
                self.counts["refused"] += 1
                field = exc.field  # None, or steps[k] itself (batch_entry); else the step's field, under steps[k]
                if field is not None and isinstance(item, dict):
                    field = f"steps[{k}].{field}"
                results.append({"error": str(exc), "field": field, "status": exc.status})
        return {"results": results}

    # -- reading -------------------------------------------------------------------------------------------------
    def status(self) -> dict:
        """Counters and learner state (``GET /v1/status``): ``error`` is None or why the learner stopped, and
        ``learner_failed_at`` the log record it failed on (then the server acts from the last good policy),
        ``skipped_rollouts`` the records where rollouts were dropped (``--resume-learner skip``)."""
        from lcpo.serve.learner import LearnerFailure, finite

        lr = self.learner
        return {
            "agent": self.agent_name, "env": self.cfg.env or "spec", "learn": self.cfg.learn,
            "steps": self.state.transitions, "decisions": self.state.decisions, "records": self.state.records,
            "outstanding": self.state.outstanding, "streams": len(self.state.streams),
            "updates": lr.updates, "policy_version": lr.snapshot.version, "learner_position": lr.consumed,
            "learner_waiting": lr.waiting, "rollout_steps": lr.rollout_steps,
            "checkpoint_position": lr.checkpointed_at, "replayed_on_start": self.replayed,
            "accepted": self.counts["accepted"], "refused": self.counts["refused"],
            "last_update_s": lr.update_seconds, "uptime_s": time.time() - self.started,
            "diagnostics": {k: finite(v) for k, v in lr.last_diagnostics.items()},
            "error": None if lr.error is None else str(lr.error),
            "learner_failed_at": lr.error.position if isinstance(lr.error, LearnerFailure) else None,
            "skipped_rollouts": list(self.skipped),
            "learner_pid": getattr(lr, "pid", None), "learner_ready": getattr(lr, "ready", True),
        }

    def metrics(self) -> str:
        """Prometheus text exposition of :meth:`status` (``GET /metrics``)."""
        s = self.status()
        rows = [
            ("lcpo_serve_steps_total", "counter", "transitions accepted", s["steps"]),
            ("lcpo_serve_decisions_total", "counter", "decisions answered", s["decisions"]),
            ("lcpo_serve_requests_refused_total", "counter", "requests refused (4xx/5xx) since start", s["refused"]),
            ("lcpo_serve_updates_total", "counter", "policy updates applied", s["updates"]),
            ("lcpo_serve_policy_version", "gauge", "version of the published acting policy", s["policy_version"]),
            ("lcpo_serve_streams", "gauge", "streams held", s["streams"]),
            ("lcpo_serve_outstanding_decisions", "gauge", "decisions awaiting their reward", s["outstanding"]),
            ("lcpo_serve_learner_lag_records", "gauge", "log records not yet consumed by the learner",
             s["records"] - s["learner_position"]),
            ("lcpo_serve_last_update_seconds", "gauge", "wall time of the last update", s["last_update_s"]),
            ("lcpo_serve_learner_failed", "gauge", "1 if the learner stopped (error in /v1/status)",
             int(s["error"] is not None)),
        ]
        out = []
        for name, kind, text, value in rows:
            out += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name} {value}"]
        for k, v in sorted(s["diagnostics"].items()):
            if v is not None:
                out.append(f'lcpo_serve_diagnostic{{key="{k}"}} {v}')
        return "\n".join(out) + "\n"

    def close(self) -> None:
        """Drain the learner, checkpoint, close the log and free the state folder (SIGTERM ends here).

        Raises:
            RuntimeError: the learner failed (no final checkpoint; the log holds every record, and a failure on a
                record is in ``STATE/learner-failure.json``). Also kept in ``close_error`` (uvicorn's lifespan
                shutdown only logs it).
        """
        if self.closed:
            return
        self.closed = True
        try:
            if self.inline:
                self.learner.checkpoint()
            else:
                self.learner.stop()
        except BaseException as exc:
            self.close_error = exc
            raise
        finally:
            self.log.close()
            self._lock.release()


def _error_body(exc: RequestError) -> bytes:
    return dumps({"error": str(exc), "field": exc.field})


def create_app(server: Server):
    """The ASGI application around ``server``; its shutdown closes the server (drain, checkpoint). A learner that
    had failed makes that shutdown end without a final checkpoint, quietly: ``server.close_error`` holds why.

    The POST endpoints are served by a plain ASGI function (headers read from the scope, the body gathered up
    to ``max_body``, one JSON answer) in front of a Starlette application that serves the GET endpoints and
    the lifespan: the decision path then costs the server tens of microseconds less per request. The returned
    function also carries ``direct_routes`` (raw path -> handler), ``direct_answer(handler, headers, body)``
    (``(status, body bytes, extra headers)``) and ``max_body``, which :func:`lcpo.serve.http.http_protocol`
    uses to answer ``POST /v1/*`` without an ASGI cycle.
    """
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, PlainTextResponse
    from starlette.routing import Route

    cfg = server.cfg
    token = None if cfg.token is None else cfg.token.encode()
    max_body = int(cfg.max_body)

    def authorize(headers: dict) -> None:
        if token is None:
            return
        got = headers.get(b"authorization", b"")
        if not (got[:7].lower() == b"bearer " and hmac.compare_digest(got[7:], token)):  # the scheme: any case
            raise RequestError(401, "missing or wrong bearer token (header 'Authorization: Bearer TOKEN')",
                               "authorization")

    handlers = {"/v1/step": server.step, "/v1/act": server.act, "/v1/observe": server.observe,
                "/v1/batch": server.batch}

    def check_head(headers: dict) -> None:  # what is checked before the body: content type, declared size
        ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if ctype != b"application/json":
            raise RequestError(415, f"content-type must be application/json, got {ctype.decode('latin-1') or 'none'!r}",
                               "content-type")
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > max_body:
            raise RequestError(413, f"request body of {int(length)} bytes exceeds the limit of {max_body}", "body")

    def parse(body: bytes) -> Any:
        try:
            return loads(body)
        except DuplicateKeyError as exc:  # json alone would keep the last value silently
            raise RequestError(400, f"the request body repeats a key in one object ({exc}); each key may appear "
                                    "once", "body") from None
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise RequestError(400, f"the request body is not JSON ({str(exc).splitlines()[0][:120]})", "body") \
                from None

    async def read_json(headers: dict, receive) -> Any:
        check_head(headers)
        chunks, size, more = [], 0, True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                raise RequestError(400, "the client disconnected before sending the whole body", "body")
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > max_body:
                raise RequestError(413, f"request body exceeds the limit of {max_body} bytes", "body")
            chunks.append(chunk)
            more = msg.get("more_body", False)
        return parse(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def direct_answer(handler, headers: dict, body: bytes | None) -> tuple[int, bytes, tuple]:
        """The decision path without ASGI (:mod:`lcpo.serve.http`): the same checks in the same order and the
        same answer as ``app`` below; ``body`` None means it exceeded ``max_body``."""
        try:
            authorize(headers)
            check_head(headers)
            if body is None:
                raise RequestError(413, f"request body exceeds the limit of {max_body} bytes", "body")
            out = handler(parse(body))
        except RequestError as exc:
            server.counts["refused"] += 1
            return exc.status, _error_body(exc), ((b"www-authenticate", b"Bearer"),) if exc.status == 401 else ()
        return 200, dumps(out), ()

    async def send_json(send, status: int, body: bytes, extra: tuple = ()) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                *extra]})
        await send({"type": "http.response.body", "body": body})

    def get(handler, text: bool = False):
        async def endpoint(request):
            try:
                authorize({k.encode("latin-1"): v.encode("latin-1") for k, v in request.headers.items()})
            except RequestError as exc:
                return JSONResponse({"error": str(exc), "field": exc.field}, status_code=401,
                                    headers={"WWW-Authenticate": "Bearer"})
            out = handler()
            return PlainTextResponse(out, media_type="text/plain; version=0.0.4") if text else JSONResponse(out)
        return endpoint

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        try:
            server.close()
        except RuntimeError:
            if server.learner.error is None:
                raise
            # the learner had failed: no final checkpoint, kept in close_error for the CLI's one-line message
            # (uvicorn would print the error as "Application shutdown failed" with its traceback)

    routes = [
        Route("/v1/status", get(server.status), methods=["GET"]),
        Route("/metrics", get(server.metrics, text=True), methods=["GET"]),
        Route("/openapi.json", get(lambda: OPENAPI), methods=["GET"]),
    ]

    async def refused(request, exc):  # an unknown path or method: the protocol's JSON, not Starlette's text
        method, path = request.method, request.url.path
        if exc.status_code == 404:
            message = (f"no endpoint {method} {path}; the endpoints: POST /v1/step, /v1/act, /v1/observe, /v1/batch; "
                       "GET /v1/status, /metrics, /openapi.json (the schema)")
        elif exc.status_code == 405:
            message = f"method {method} not allowed on {path}: use {(exc.headers or {}).get('Allow', 'another')}"
        else:
            message = str(exc.detail)
        server.counts["refused"] += 1
        return JSONResponse({"error": message, "field": None}, status_code=exc.status_code, headers=exc.headers)

    from starlette.exceptions import HTTPException

    inner = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: refused})
    inner.state.server = server

    async def app(scope, receive, send):
        handler = handlers.get(scope.get("path")) if scope["type"] == "http" else None
        if handler is None:
            await inner(scope, receive, send)
            return
        if scope["method"] != "POST":
            server.counts["refused"] += 1
            await send_json(send, 405, dumps({"error": f"method {scope['method']} not allowed on {scope['path']}: "
                                                       "use POST", "field": None}), ((b"allow", b"POST"),))
            return
        headers = dict(scope["headers"])
        try:
            authorize(headers)
            body = await read_json(headers, receive)
            out = handler(body)
        except RequestError as exc:
            server.counts["refused"] += 1
            await send_json(send, exc.status, _error_body(exc),
                            ((b"www-authenticate", b"Bearer"),) if exc.status == 401 else ())
            return
        await send_json(send, 200, dumps(out))

    app.state = inner.state  # type: ignore[attr-defined]
    # for lcpo.serve.http's direct lane: exact raw paths -> handlers, and the synchronous answer
    app.direct_routes = {k.encode(): v for k, v in handlers.items()}  # type: ignore[attr-defined]
    app.direct_answer = direct_answer  # type: ignore[attr-defined]
    app.max_body = max_body  # type: ignore[attr-defined]
    return app


_NUM = {"type": "number"}
_OBS = {"type": "array", "items": _NUM, "description": "observation: obs_dim finite numbers within the space's bounds"}
_INFO = {"type": "object", "additionalProperties": False, "description": "per-transition extras",
         "properties": {"gamma": {"type": "number", "minimum": 0, "maximum": 1,
                                  "description": "time-dependent discount of this step"},
                        "forced": {"type": "boolean", "description": "the system overrode the action"}}}
_ACTION = {"oneOf": [{"type": "integer"}, {"type": "array", "items": {"type": "integer"}}],
           "description": "an int (Discrete) or a list of ints (MultiDiscrete)"}
_DECISION = {"type": "object", "required": ["action", "decision", "policy_version"],
             "properties": {"action": _ACTION, "decision": {"type": "string", "example": "d42"},
                            "policy_version": {"type": "integer", "description": "updates behind the policy"}}}
_ERROR = {"type": "object", "properties": {"error": {"type": "string"}, "field": {"type": ["string", "null"]}}}


def _op(summary: str, request: dict | None, response: dict, codes=(400, 401, 404, 409, 413, 415, 422, 429, 503)):
    op: dict = {"summary": summary, "responses": {"200": {"description": "OK", "content": {
        "application/json": {"schema": response}}}}}
    for c in codes:
        op["responses"][str(c)] = {"description": "refused; nothing changed",
                                   "content": {"application/json": {"schema": _ERROR}}}
    if request is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": request}}}
    return op


#: The OpenAPI 3.1 description served at ``GET /openapi.json``.
OPENAPI: dict = {
    "openapi": "3.1.0",
    "info": {"title": "lcpo serve", "version": "1",
             "description": "A live policy server that keeps learning (docs/serving.md)."},
    "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    "security": [{}, {"bearer": []}],
    "paths": {
        "/v1/step": {"post": _op("One step of a stream: the previous action's reward and flags, and a new action",
                                 {"type": "object", "required": ["stream", "obs"], "additionalProperties": False,
                                  "properties": {"stream": {"type": "string", "pattern": "^[A-Za-z0-9._:@/-]{1,128}$"},
                                                 "obs": _OBS, "reward": {"type": ["number", "null"]},
                                                 "terminated": {"type": "boolean"}, "truncated": {"type": "boolean"},
                                                 "final_obs": _OBS, "info": _INFO}}, _DECISION)},
        "/v1/act": {"post": _op("A decision whose reward comes later (/v1/observe)",
                                {"type": "object", "required": ["stream", "obs"], "additionalProperties": False,
                                 "properties": {"stream": {"type": "string"}, "obs": _OBS}}, _DECISION)},
        "/v1/observe": {"post": _op("The outcome of a decision (a stream's decisions in order)",
                                    {"type": "object", "required": ["decision", "reward", "next_obs"],
                                     "additionalProperties": False,
                                     "properties": {"decision": {"type": "string"}, "reward": _NUM, "next_obs": _OBS,
                                                    "terminated": {"type": "boolean"},
                                                    "truncated": {"type": "boolean"}, "info": _INFO}},
                                    {"type": "object", "properties": {"steps": {"type": "integer"},
                                                                      "policy_version": {"type": "integer"}}})},
        "/v1/batch": {"post": _op("Up to 1,024 steps in one request, applied in order, each as one /v1/step",
                                  {"type": "object", "required": ["steps"], "additionalProperties": False,
                                   "properties": {"steps": {"type": "array", "maxItems": 1024,
                                                            "items": {"$ref": "#/paths/~1v1~1step/post/requestBody/"
                                                                              "content/application~1json/schema"}}}},
                                  {"type": "object", "properties": {"results": {"type": "array", "items": {
                                      "oneOf": [_DECISION, {**_ERROR, "properties": {
                                          **_ERROR["properties"], "status": {"type": "integer"}}}]}}}})},
        "/v1/status": {"get": _op("Counters, learner state and the last update's diagnostics", None,
                                  {"type": "object"}, codes=(401,))},
        "/metrics": {"get": {"summary": "Prometheus text format", "responses": {"200": {
            "description": "OK", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
        "/openapi.json": {"get": {"summary": "This schema", "responses": {"200": {"description": "OK"}}}},
    },
}
