"""`lcpo serve` as a subprocess, for the command-line tests of tests/serve (a real server on 127.0.0.1, its own
process group, stderr kept for the assertions)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

#: the observation and action spaces every CLI test serves: 3 bounded numbers in, one of 3 actions out
SPEC = {"observation": {"size": 3, "low": -5.0, "high": 5.0}, "action": {"discrete": 3}}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_process(tmp_path: Path, port: int, *extra: str, sets: tuple[str, ...] = ("rollout_steps=8",)
                  ) -> subprocess.Popen:
    """Start ``lcpo serve`` (A2C on :data:`SPEC`, state in ``tmp_path/state``) on ``port``, in its own process
    group (as a terminal's job); ``sets`` are its ``--set`` items, ``extra`` further arguments. Stderr is piped
    (text), stdout discarded."""
    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    args = [sys.executable, "-m", "lcpo.cli.main", "serve", "--spec", str(tmp_path / "spec.json"), "--agent", "a2c",
            *[a for item in sets for a in ("--set", item)], "--state", str(tmp_path / "state"),
            "--port", str(port), *extra]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
