"""Never two copies of one run in one folder: two processes running the same sweep task (what Dask does when it
re-runs a task whose first copy is still alive) run it once; the second waits, then returns the same summary."""

import json
import subprocess
import sys
import time

import lcpo_fake_run as fake

from lcpo.persistence.runlock import RunLock

FAKE = "lcpo_fake_run"

_TASK = """
import json, sys
from lcpo.experiments.runner import run_one
print(json.dumps(run_one(json.loads(sys.argv[1]), sys.argv[2], sys.argv[3])), flush=True)
"""


def test_two_processes_on_one_run_folder_run_it_once(tmp_path):
    config = fake.RunConfig(steps=1200, checkpoint_every=400, env_kwargs={"delay": 0.05}).to_dict()
    out = tmp_path / "runs" / "r0"
    out.mkdir(parents=True)
    gate = RunLock(out).acquire()  # both copies start while the folder is held, so they surely overlap
    procs = [subprocess.Popen([sys.executable, "-c", _TASK, json.dumps(config), str(out), FAKE],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    time.sleep(1.0)
    assert all(p.poll() is None for p in procs)  # both are waiting for the lock
    assert not (out / "calls.log").exists()
    gate.release()
    results = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=60)
        assert p.returncode == 0, stderr
        results.append(json.loads(stdout))
    # one execution: one start recorded, and both copies return the summary that execution wrote (same wall time)
    assert (out / "calls.log").read_text().split() == ["0"]
    assert results[0] == results[1] == json.loads((out / "summary.json").read_text())
    assert results[0]["steps"] == 1200
