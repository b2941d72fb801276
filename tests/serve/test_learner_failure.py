"""A logged record the learner fails on does not take the service down, now or at any restart: the failure (its
log record and one-line reason) is recorded in ``STATE/learner-failure.json``; the server acts on from the last
good policy, logs every request and shows the failure in ``/v1/status``; a restart replays the learner exactly to
the record before the failure and serves again (no crash loop); ``--resume-learner retry`` meets the same failure
again (learning is a function of the log) and ``--resume-learner skip`` drops the rollout that failed and learns
on. In every mode: inline, thread and process."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from lcpo.serve.app import ServeConfig, Server
from lcpo.persistence.checkpoint import RunCheckpoints
from lcpo.serve.learner import FAILURE_FILE, Learner, build_agent, load_failures
from lcpo.serve.protocol import ServerState, Spaces
from lcpo.serve.spec import spec_env

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SPEC = {"observation": {"size": 3, "low": -5.0, "high": 5.0}, "action": {"discrete": 3}}
# without the return normaliser, six rewards of 3e38 (each accepted: within float32) make the second update's
# advantages overflow float32, which the agent refuses: an update that fails on the data, every time
OVERRIDES = {"rollout_steps": 6, "normalize_returns": False}
BIG = 3e38
FAILED_AT = 12  # record 0 starts the stream; records 1-6 complete update 1; records 7-12 the failing update 2


def _server(tmp_path, learn: str, **kw) -> Server:
    return Server(ServeConfig(agent="a2c", spec=SPEC, overrides=OVERRIDES, state_dir=str(tmp_path / "state"),
                              learn=learn, keep_log=True, **kw))


def _records(tmp_path) -> list[dict]:
    return [json.loads(line.split("\t")[0]) for seg in sorted((tmp_path / "state/log").glob("*.jsonl"))
            for line in seg.read_text().splitlines()]


def _reference(tmp_path, upto: int, skip=()) -> Learner:
    """A fresh learner fed the first ``upto`` log records (the state the server's learner must be in)."""
    env = spec_env(SPEC)
    ref = Learner(build_agent(env, "a2c", 0, OVERRIDES), ServerState(Spaces(env.observation_space, env.action_space)),
                  skip=skip)
    for rec in _records(tmp_path)[:upto]:
        ref.consume(rec)
    return ref


def _assert_same_learner(a: dict, want: Learner) -> None:
    """``a``: a learner's state dict (or a checkpoint's state), equal to ``want``'s."""
    b = want.state_dict()
    assert a["replica"] == b["replica"] and a["runs"] == b["runs"]
    assert a["agent"]["updates"] == b["agent"]["updates"]
    for k in ("actor", "critic"):
        for name, t in b["agent"][k].items():
            assert torch.equal(t, a["agent"][k][name]), f"{k}.{name}"


def _step(server: Server, reward: float | None) -> dict:
    return server.step({"stream": "s", "obs": [0.1, -0.2, 0.3], **({} if reward is None else {"reward": reward})})


def _wait(server: Server) -> None:
    """Until the learner consumed every record or failed."""
    server.learner.wait_for(server.state.records, timeout=120)


def _assert_failed(server: Server) -> dict:
    st = server.status()
    assert st["learner_failed_at"] == FAILED_AT and st["learner_position"] == FAILED_AT, st
    assert st["error"].startswith(f"learning from log record {FAILED_AT} failed: ValueError: advantages "), st
    assert "overflows float32" in st["error"] and "\n" not in st["error"]
    assert (st["updates"], st["policy_version"]) == (1, 1)  # the last good policy
    failed, skipped = load_failures(server.cfg.state_dir)
    assert (failed.position, skipped) == (FAILED_AT, [])
    assert str(failed) == st["error"]
    return st


@pytest.mark.parametrize("learn", ["inline", "thread", "process"])
def test_a_record_the_learner_fails_on_is_recorded_and_no_restart_crash_loops(tmp_path, learn):
    server = _server(tmp_path, learn)
    try:
        _step(server, None)
        for k in range(6):
            _step(server, 0.5 * k)
        _wait(server)
        assert server.status()["updates"] == 1
        answers = [_step(server, BIG) for _ in range(6)]  # accepted: each reward is a finite float32
        _wait(server)
        # the learner failed on record 12; the server acts on from the last good policy and logs every request
        assert [a["policy_version"] for a in answers] == [1] * 6
        reason = _assert_failed(server)["error"].split(" failed: ", 1)[1]
        after = _step(server, 1.0)
        assert after["policy_version"] == 1 and after["decision"] == "d13" and server.status()["records"] == 14
        assert server.status()["learner_position"] == FAILED_AT
    finally:
        with pytest.raises(RuntimeError, match=f"the learner failed: learning from log record {FAILED_AT} failed"):
            server.close()  # no final checkpoint: the learner's state may hold part of the failed update

    for restart in range(2):  # the service comes back at every restart, in the learner's state before the failure
        server = _server(tmp_path, learn)
        try:
            st = _assert_failed(server)
            assert st["learner_pid"] is None and st["checkpoint_position"] == 7
            _assert_same_learner(server.learner.state_dict(), _reference(tmp_path, FAILED_AT))
            out = _step(server, 2.0)
            assert out["policy_version"] == 1 and out["decision"] == f"d{14 + restart}"
            assert server.status()["records"] == 15 + restart
        finally:
            with pytest.raises(RuntimeError, match="the learner failed"):
                server.close()

    # retry: the same log, the same code: the same failure at the same record, recorded again
    server = _server(tmp_path, learn, resume_learner="retry")
    try:
        _wait(server)
        _assert_failed(server)
        assert _step(server, 3.0)["policy_version"] == 1
    finally:
        with pytest.raises(RuntimeError, match="the learner failed"):
            server.close()

    # skip: the rollout that failed is dropped at record 12; the learner consumes the rest and learns on
    server = _server(tmp_path, learn, resume_learner="skip")
    try:
        _wait(server)
        st = server.status()
        assert st["error"] is None and st["learner_failed_at"] is None and st["skipped_rollouts"] == [FAILED_AT]
        assert st["learner_position"] == st["records"] == 17 and st["updates"] == 1
        for k in range(6):  # records 13-16 wait (4 transitions); 2 more complete a rollout
            _step(server, float(k))
        _wait(server)
        assert server.status()["updates"] == 2
    finally:
        server.close()
    step, saved = RunCheckpoints(tmp_path / "state/checkpoint").load()  # the final checkpoint: a replay with the skip
    assert step == 23
    _assert_same_learner(saved, _reference(tmp_path, 23, skip={FAILED_AT}))
    failed, skipped = load_failures(tmp_path / "state")
    assert failed is None and [(s.position, s.reason) for s in skipped] == [(FAILED_AT, reason)]
    server = _server(tmp_path, learn)  # and a plain restart continues from the checkpoint after the skip
    try:
        st = server.status()
        assert st["error"] is None and st["updates"] == 2 and st["checkpoint_position"] == 23
    finally:
        server.close()


def test_the_failure_shows_in_the_http_status_and_metrics_and_acting_goes_on(tmp_path):
    pytest.importorskip("starlette")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from lcpo.serve.app import create_app

    server = _server(tmp_path, "thread")
    client = TestClient(create_app(server)).__enter__()
    try:
        assert client.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0]}).status_code == 200
        for reward in [0.0] * 6 + [BIG] * 6:
            assert client.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0], "reward": reward}).status_code == 200
        _wait(server)
        st = client.get("/v1/status").json()
        assert st["learner_failed_at"] == FAILED_AT and "advantages" in st["error"]
        assert "lcpo_serve_learner_failed 1\n" in client.get("/metrics").text
        r = client.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0], "reward": 1.0})
        assert r.status_code == 200 and r.json()["policy_version"] == 1
    finally:
        client.__exit__(None, None, None)  # a quiet shutdown (no "Application shutdown failed" traceback) ...
    assert "the learner failed" in str(server.close_error)  # ... that keeps why there is no final checkpoint


def test_a_bad_failure_file_is_refused_in_one_line_naming_it(tmp_path):
    server = _server(tmp_path, "inline")
    _step(server, None)
    server.close()
    path = tmp_path / "state" / FAILURE_FILE
    for text, why in [('{"failed": {"position": 3, "position": 4, "error": "x"}, "skipped": []}', "duplicate key"),
                      ("{not json", "not valid JSON"),
                      ('{"failed": {"position": -1, "error": "x"}, "skipped": []}', "position"),
                      ('{"failed": null}', "skipped")]:
        path.write_text(text)
        with pytest.raises(ValueError, match=f"{FAILURE_FILE}.*{why}") as refused:
            _server(tmp_path, "inline")
        assert "\n" not in str(refused.value)
    path.write_text('{"failed": {"position": 9, "error": "ValueError: x"}, "skipped": []}')  # beyond the log (1 record)
    with pytest.raises(ValueError, match="records a learner failure at log record 9"):
        _server(tmp_path, "inline")
    with pytest.raises(ValueError, match="resume_learner must be one of retry, skip"):
        _server(tmp_path, "inline", resume_learner="forget")


def test_the_failure_is_recorded_before_a_waiter_sees_it(tmp_path, monkeypatch):
    """Under load the suite once saw `learner_failed_at` in the status while the failure file was not written
    yet: ``fail`` published ``error`` before ``on_failure`` recorded it. A slow disk makes that window wide."""
    import time

    import lcpo.serve.learner as learner

    record_failure = learner.record_failure

    def slow_record(state_dir, failure):
        time.sleep(0.5)
        record_failure(state_dir, failure)

    monkeypatch.setattr(learner, "record_failure", slow_record)  # the server imports it when it starts
    server = _server(tmp_path, "thread")
    try:
        _step(server, None)
        for k in range(6):
            _step(server, 0.5 * k)
        for _ in range(6):
            _step(server, BIG)
        deadline = time.monotonic() + 60
        while server.status()["learner_failed_at"] is None:  # as a client polling /v1/status would
            assert time.monotonic() < deadline
            time.sleep(0.01)
        _assert_failed(server)  # reads the failure file at once
    finally:
        with pytest.raises(RuntimeError, match="the learner failed"):
            server.close()
