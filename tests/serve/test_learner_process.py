"""The learner in its own process (``--learn process``): it reads the log itself, in order, never past what the
server has written completely; every action the server answered comes from the snapshot the learner published
for that version, exactly; its final state equals a learner fed the same log; it dies with the server, also on
kill -9; a learner that dies makes the server refuse with 503; a new server waits for an old learner's lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from lcpo.serve.log import LogError, LogReader, TransitionLog, discard_segments
from test_process import _wait_ready  # the server-start wait, shared with the kill -9 tests

SPEC = {"observation": {"size": 3, "low": -5.0, "high": 5.0}, "action": {"discrete": 3}}


# -- the log reader ---------------------------------------------------------------------------------------------------
def _rec(k: int) -> dict:
    return {"k": "act", "s": f"s{k % 3}", "o": np.float32([k / 7, -k / 3, 0.5]), "a": k % 3, "v": 0}


def test_log_reader_follows_a_growing_log_across_segments_and_never_reads_past_the_limit(tmp_path):
    log = TransitionLog(tmp_path / "log", fsync="never", segment_bytes=300)
    log.open(0)
    reader = LogReader(tmp_path / "log", 0)
    got = []
    for k in range(40):
        log.append(_rec(k))
        if k % 7 == 3:
            got += reader.read(k + 1)
    got += reader.read(37)  # a limit behind the reader: nothing
    got += reader.read(40)
    os.write(log._fd, b'{"k":"act","s":"s1","o":[0')  # a record being written: not complete, beyond the limit
    assert reader.read(10**9) == []  # nothing complete past record 39: not read, not refused
    os.ftruncate(log._fd, log._size)  # the cut of a failed write
    assert len(log.segments()) > 3
    assert [r["#"] for r in got] == list(range(40))
    assert got == TransitionLog(tmp_path / "log", fsync="never").open(0)  # the same records as a restart reads
    log.append(_rec(40))
    assert [r["#"] for r in reader.read(41)] == [40]
    # a reader that starts inside a segment; then the limit stops it exactly
    mid = LogReader(tmp_path / "log", 17)
    assert [r["#"] for r in mid.read(23)] == list(range(17, 23))
    assert [r["#"] for r in mid.read(41)] == list(range(23, 41))
    log.close()


def test_log_reader_reads_a_line_longer_than_its_read_size(tmp_path, monkeypatch):
    monkeypatch.setattr(LogReader, "CHUNK", 16)  # every record line is longer than one read
    log = TransitionLog(tmp_path / "log", fsync="never")
    log.open(0)
    for k in range(5):
        log.append(_rec(k))
    got = LogReader(tmp_path / "log", 0).read(5)
    late = LogReader(tmp_path / "log", 3).read(5)  # skipping long lines to its start
    log.close()
    assert [r["#"] for r in got] == list(range(5)) and got == TransitionLog(tmp_path / "log", fsync="never").open(0)
    assert late == got[3:]


def test_log_reader_refuses_corruption_and_discard_keeps_the_last_segment(tmp_path):
    log = TransitionLog(tmp_path / "log", fsync="never", segment_bytes=200)
    log.open(0)
    for k in range(12):
        log.append(_rec(k))
    log.close()
    segs = log.segments()
    assert discard_segments(tmp_path / "log", 10**9) == len(segs) - 1 and log.segments() == segs[-1:]
    with pytest.raises(LogError, match="no log segment"):
        LogReader(tmp_path / "log", 0).read(1)
    last = segs[-1]
    data = bytearray(last.read_bytes())
    data[data.index(b"\t") - 2] ^= 1  # a flipped byte inside the first record of the segment: bad CRC
    last.write_bytes(bytes(data))
    with pytest.raises(LogError, match="is corrupt"):
        LogReader(tmp_path / "log", int(last.stem)).read(12)


# -- the server with a learner process --------------------------------------------------------------------------------
def _server(tmp_path, **kw):
    from lcpo.serve.app import ServeConfig, Server

    cfg = ServeConfig(agent="a2c", spec=SPEC, overrides={"rollout_steps": 6}, state_dir=str(tmp_path / "state"),
                      learn="process", **kw)
    return Server(cfg)


def _records(tmp_path) -> list[dict]:
    return [json.loads(line.split("\t")[0]) for seg in sorted((tmp_path / "state/log").glob("*.jsonl"))
            for line in seg.read_text().splitlines()]


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (FileNotFoundError, ProcessLookupError):  # gone (reaped between the open and the read: ESRCH)
            return True
        time.sleep(0.05)
    return False


def test_process_learner_publishes_exact_snapshots_and_ends_in_the_state_of_a_learner_fed_the_log(tmp_path):
    import torch

    from lcpo.persistence.checkpoint import RunCheckpoints
    from lcpo.serve.learner import ActingNoise, Learner, build_agent
    from lcpo.serve.protocol import ServerState, Spaces, vec
    from lcpo.serve.spec import spec_env

    server = _server(tmp_path, segment_bytes=4000, keep_log=True)
    pid = server.learner.pid
    rng = np.random.default_rng(3)
    versions = set()
    try:
        assert server.status()["learner_pid"] == pid and pid != os.getpid()
        for s in ("a", "b", "c"):
            server.step({"stream": s, "obs": rng.uniform(-1, 1, 3).round(3).tolist()})
        for k in range(300):
            s = "abc"[int(rng.integers(3))]
            out = server.step({"stream": s, "obs": rng.uniform(-1, 1, 3).round(3).tolist(),
                               "reward": float(rng.normal())})
            versions.add(out["policy_version"])
            if k % 50 == 49:  # let the learner catch up now and then, so later actions come from newer policies
                assert server.learner.wait_for(server.state.records, timeout=120)
        assert server.learner.wait_for(server.state.records, timeout=120)
        st = server.status()
        assert st["learner_position"] == st["records"] == 303 and st["updates"] == 300 // 6
        assert st["checkpoint_position"] > 0 and st["error"] is None
    finally:
        server.close()
    assert _gone(pid, 10), "the learner process ended with the server's close"
    assert len(versions) > 3, "actions came from several published policy versions"

    records = _records(tmp_path)  # all of them (keep_log)
    step, saved = RunCheckpoints(tmp_path / "state/checkpoint").load()
    assert step == 303 and saved["agent"]["updates"] == 50
    env = spec_env(SPEC)
    ref = Learner(build_agent(env, "a2c", 0, {"rollout_steps": 6}), ServerState(Spaces(env.observation_space,
                                                                                     env.action_space)))
    noise = ActingNoise(ref.agent.rngs["act"].bit_generator.state, 256, 3)
    assert [r["#"] for r in records] == list(range(303))
    snapshots = {0: ref.snapshot}
    for rec in records:
        if rec["k"] in ("step", "act"):  # the answered action is the published policy v's, with noise row n
            n = ref.replica.decisions
            want = snapshots[rec["v"]].policy.sample(vec(rec["o"]), noise.row(n))
            assert int(want[0]) == rec["a"], f"decision d{n} (policy version {rec['v']})"
        ref.consume(rec)
        snapshots.setdefault(ref.snapshot.version, ref.snapshot)
    saved.pop("acting_noise")
    want = ref.state_dict()
    assert saved["replica"] == want["replica"] and saved["runs"] == want["runs"]
    for k in ("actor", "critic"):
        for name, t in want["agent"][k].items():
            assert torch.equal(t, saved["agent"][k][name]), name


def test_a_learner_that_dies_makes_the_server_refuse_and_a_restart_recovers(tmp_path):
    server = _server(tmp_path, checkpoint_every=1, segment_bytes=300)
    try:
        server.step({"stream": "s", "obs": [0, 0, 0]})
        for k in range(8):
            server.step({"stream": "s", "obs": [0.1, 0, 0], "reward": float(k)})
        assert server.learner.wait_for(9, timeout=120)
        assert server.status()["checkpoint_position"] == 7  # after the update at the 6th transition
        first = min(int(p.stem) for p in (tmp_path / "state/log").glob("*.jsonl"))
        assert 0 < first <= 7, "the learner process deleted the log segments its checkpoint covers"
        os.kill(server.learner.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while server.status()["error"] is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "learner process exited" in server.status()["error"]
        from lcpo.serve.protocol import RequestError

        with pytest.raises(RequestError, match="learner") as refused:
            server.step({"stream": "s", "obs": [0, 0, 0], "reward": 1.0})
        assert refused.value.status == 503 and server.state.records == 9  # refused: nothing written
        with pytest.raises(RuntimeError, match="the learner failed"):
            server.close()
    finally:
        server.close()
    server = _server(tmp_path)  # the log is whole: a restart replays it into a new learner process
    try:
        assert server.learner.wait_for(9, timeout=120)
        assert server.status()["updates"] == 1 and server.status()["error"] is None
    finally:
        server.close()


def test_a_new_server_waits_for_the_lock_of_an_old_learner(tmp_path):
    from lcpo.persistence.runlock import RunFolderBusy
    from lcpo.serve.process import _lock_file, wait_learner_gone

    (tmp_path / "state").mkdir()
    held = _lock_file(tmp_path / "state", 0)
    with pytest.raises(RunFolderBusy, match="learner process still holds"):
        wait_learner_gone(tmp_path / "state", timeout_s=0.2)
    held.close()
    wait_learner_gone(tmp_path / "state", timeout_s=0.2)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]




def _cli_server(tmp_path, port: int) -> subprocess.Popen:
    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    args = [sys.executable, "-m", "lcpo.cli.main", "serve", "--spec", str(tmp_path / "spec.json"), "--agent", "a2c",
            "--set", "rollout_steps=8", "--state", str(tmp_path / "state"), "--port", str(port), "--learn", "process"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, start_new_session=True,  # its own group
                            stderr=open(tmp_path / f"server-{time.time_ns()}.err", "wb"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_learner_process_dies_with_the_server_on_kill9_and_ends_with_it_on_sigterm_also_to_the_group(tmp_path):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("uvicorn")
    port = _free_port()
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
    from lcpo.persistence.checkpoint import RunCheckpoints

    hows = ("kill -9", "SIGTERM", "SIGTERM to the group",  # the group: as a service manager stops a service
            "the learner killed, then SIGTERM")
    for how in hows:
        proc = _cli_server(tmp_path, port)
        try:
            _wait_ready(http, proc)
            http.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0]})
            for k in range(20):
                assert http.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0], "reward": 1.0}).status_code == 200
            pid = http.get("/v1/status").json()["learner_pid"]
            assert pid is not None and not _gone(pid, 0)
            if how == "kill -9":
                proc.kill()
            elif how == "SIGTERM":
                proc.send_signal(signal.SIGTERM)
            elif how == "SIGTERM to the group":
                os.killpg(proc.pid, signal.SIGTERM)
            else:
                os.kill(pid, signal.SIGKILL)
                assert _gone(pid, 10)
                deadline = time.monotonic() + 30
                while http.get("/v1/status").json()["error"] is None:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
                assert http.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0], "reward": 1.0}).status_code == 503
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=120) == 1, "a server whose learner failed exits 1 (no final checkpoint)"
                err = sorted(tmp_path.glob("server-*.err"))[-1].read_text()
                assert "stopped without a final checkpoint" in err and "learner process exited" in err
                break
            assert proc.wait(timeout=120) == (-signal.SIGKILL if how == "kill -9" else 0), how
            assert _gone(pid, 10), f"the learner process outlived the server ({how})"
            if how != "kill -9":  # drained: the checkpoint covers every record so far
                step, saved = RunCheckpoints(tmp_path / "state/checkpoint").load()
                records = 21 * (2 if how == "SIGTERM" else 3)
                assert step == records and saved["agent"]["updates"] == (records // 21 * 20) // 8, how
        except BaseException:  # a failed check: the server and its learner must not outlive the test
            if proc.poll() is None:
                proc.kill()
            raise


def test_a_bad_learner_nice_is_refused_before_anything_starts(tmp_path, capsys):
    from lcpo.cli.main import main
    from lcpo.serve.app import ServeConfig, Server

    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    rc = main(["serve", "--spec", str(tmp_path / "spec.json"), "--agent", "a2c", "--state", str(tmp_path / "state"),
               "--learner-nice", "20"])
    assert rc == 2 and "--learner-nice must be in [0, 19], got 20" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"learner_nice must be an int in \[0, 19\], got -1"):
        Server(ServeConfig(agent="a2c", spec=SPEC, state_dir=str(tmp_path / "state"), learner_nice=-1))
    assert not (tmp_path / "state").exists()


def test_the_learner_process_runs_at_the_configured_niceness(tmp_path):
    base = os.getpriority(os.PRIO_PROCESS, 0)
    if base + 7 > 19:  # the kernel caps niceness at 19: a +7 could not be told apart from no change
        pytest.skip(f"this process already runs at niceness {base}; a learner 7 steps nicer cannot be observed")
    server = _server(tmp_path, learner_nice=7)
    try:
        assert server.learner.wait_ready(timeout=120)
        assert os.getpriority(os.PRIO_PROCESS, server.learner.pid) == base + 7
    finally:
        server.close()
