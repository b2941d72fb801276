"""lcpo serve as a real process on 127.0.0.1: kill -9 at random instants and restarts lose no acknowledged
step and end in the state of a never-killed learner fed the same log; SIGTERM drains and checkpoints; the
bearer token is enforced, and a non-loopback bind without one is refused."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from lcpo.cli.main import main
from lcpo.serve.client import ServeClient, ServeError

SPEC = {"observation": {"size": 4, "low": -3.0, "high": 3.0}, "action": {"discrete": 3}}
TOKEN = "t0k3n-for-the-test-0123456789"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(tmp_path: Path, port: int) -> subprocess.Popen:
    args = [sys.executable, "-m", "lcpo.cli.main", "serve", "--spec", str(tmp_path / "spec.json"), "--agent", "a2c",
            "--seed", "5", "--set", "rollout_steps=16", "--state", str(tmp_path / "state"), "--port", str(port),
            "--keep-log", "--token-file", str(tmp_path / "token"), "--fsync", "never"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(tmp_path / f"server-{time.time_ns()}.err", "wb"))


def _wait_ready(http, proc) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode} while starting")
        try:
            if http.get("/v1/status").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("server did not start within 180 s")


def _same(a, b, path="state"):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.equal(b), path
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b) and a.dtype == b.dtype, path
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), path
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@pytest.mark.parametrize("n_kills", [1, pytest.param(4, marks=pytest.mark.slow)])
def test_kill9_at_random_instants_loses_nothing_and_recovers_the_exact_learner_then_sigterm_drains(tmp_path, n_kills):
    from lcpo.persistence.checkpoint import RunCheckpoints
    from lcpo.serve.learner import Learner, build_agent
    from lcpo.serve.protocol import ServerState, Spaces
    from lcpo.serve.spec import spec_env

    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    (tmp_path / "token").write_text(TOKEN + "\n")
    port = _free_port()
    rng = np.random.default_rng(11)
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {TOKEN}"},
                        timeout=30)
    proc = _start(tmp_path, port)
    _wait_ready(http, proc)
    # the token rule: no token or a wrong one is refused
    assert httpx.get(f"http://127.0.0.1:{port}/v1/status").status_code == 401
    with pytest.raises(ServeError) as refused:
        ServeClient(f"http://127.0.0.1:{port}", token="wrong-token-0123456789").step("s0", [0, 0, 0, 0])
    assert refused.value.status == 401 and refused.value.field == "authorization"
    client = ServeClient(f"http://127.0.0.1:{port}", token=TOKEN, timeout=30)  # the Python client drives it

    acked: list[tuple[int, int]] = []   # (decision number, action) of every answered decision
    fresh = {"s0": True, "s1": True}    # stream must (re)start with reward null
    kills, transitions = 0, 0
    timer = threading.Timer(rng.uniform(0.5, 2.0), proc.kill)
    timer.start()
    while transitions < 260 or kills < n_kills:
        s = "s0" if rng.random() < 0.6 else "s1"
        obs = rng.uniform(-1, 1, 4).round(4)
        reward = None if fresh[s] else float(rng.normal())
        try:
            d = client.step(s, obs, reward=reward)
        except httpx.TransportError:
            proc.wait(timeout=60)
            assert proc.returncode == -signal.SIGKILL
            kills += 1
            fresh = {k: True for k in fresh}  # the last answer may be lost: start the streams afresh
            proc = _start(tmp_path, port)
            _wait_ready(http, proc)
            if kills < n_kills:
                timer = threading.Timer(rng.uniform(0.5, 2.0), proc.kill)
                timer.start()
            continue
        acked.append((int(d["decision"][1:]), d["action"]))
        transitions += 0 if fresh[s] else 1
        fresh[s] = False
    timer.cancel()
    status = client.status()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 0, "SIGTERM must drain, checkpoint and exit 0"

    records = [json.loads(line.split("\t")[0]) for seg in sorted((tmp_path / "state/log").glob("*.jsonl"))
               for line in seg.read_text().splitlines()]
    assert [r["#"] for r in records] == list(range(len(records)))
    logged_actions = [r["a"] for r in records if r["k"] in ("step", "act")]
    for n, a in acked:  # no acknowledged step is lost: each answered decision (and the reward it carried)
        assert logged_actions[n] == a, f"decision d{n}"
    assert status["records"] == len(records)  # nothing after the last answer before SIGTERM

    step, saved = RunCheckpoints(tmp_path / "state/checkpoint").load()
    assert step == len(records), "the SIGTERM checkpoint covers the whole log (drained)"
    env = spec_env(SPEC)
    ref = Learner(build_agent(env, "a2c", 5, {"rollout_steps": 16}), ServerState(Spaces(env.observation_space,
                                                                                      env.action_space)))
    for rec in records:  # a learner never killed, fed the same records in the same order
        ref.consume(rec)
    assert ref.updates >= 260 // 16 and kills == n_kills
    noise = saved.pop("acting_noise")  # where the acting noise stood: server state, not the learner's
    assert noise["block"] == sum(r["k"] in ("step", "act") for r in records) // 256
    _same(ref.state_dict(), saved)


def test_non_loopback_bind_needs_a_token_file(tmp_path, capsys):
    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    rc = main(["serve", "--spec", str(tmp_path / "spec.json"), "--agent", "a2c", "--host", "0.0.0.0",
               "--state", str(tmp_path / "state")])
    assert rc == 2 and "requires --token-file" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()
    (tmp_path / "short").write_text("abc")
    rc = main(["serve", "--spec", str(tmp_path / "spec.json"), "--agent", "a2c", "--host", "10.1.2.3",
               "--token-file", str(tmp_path / "short"), "--state", str(tmp_path / "state")])
    assert rc == 2 and "at least 16 characters" in capsys.readouterr().err


def test_loopback_rule():
    from lcpo.cli.serve import is_loopback

    assert all(is_loopback(h) for h in ("127.0.0.1", "127.9.0.1", "::1", "localhost", "[::1]"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.5", "example.com", "10.0.0.1"))
