"""The straggler environment driven through ``lcpo serve`` by a separate client process, against in-process
learning on the same seed.

This script is the *load balancer*: it runs the straggler simulator (``lcpo/StragglerMitigation-v0``) and asks a
server, started as a separate process (``lcpo serve``, LCPO with the paper's straggler settings,
:func:`lcpo.envs.straggler.presets.straggler_overrides`), for every hedging timeout over HTTP
(``POST /v1/step``: the previous window's reward and its time-dependent discount ``info.gamma``, and the new
observation). The same agent is then trained in process (``agent.learn``) on the same seed, and the two are
compared: actions, rewards, the environment's run metrics, and the learner's networks (the server's SIGTERM
checkpoint against the in-process agent).

* ``--learn inline``: a request that completes a rollout waits for its update, so the policy behind every
  action is the in-process one: everything must be identical, bit for bit.
* ``--learn process`` (the CLI's default) or ``--learn thread`` (formerly ``background``): acting never waits,
  so the few actions answered while an update runs come from the previous policy; learning then differs
  slightly, and the script reports how much.

Usage::

    python benchmarks/serve_straggler.py [--steps 18432] [--rollout 4608] [--learn inline] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=4 * 4608)
    p.add_argument("--rollout", type=int, default=4608, help="rollout_steps (the paper's: 4608)")
    p.add_argument("--agent", default="lcpo", choices=("lcpo", "a2c"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workload", default="azure-llm")
    p.add_argument("--learn", default="inline", choices=("inline", "process", "thread", "background"))
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)

    import torch

    from lcpo.agents import AGENTS
    from lcpo.envs.registration import make_env
    from lcpo.envs.straggler.presets import straggler_overrides
    from lcpo.persistence.checkpoint import RunCheckpoints
    from lcpo.serve.client import ServeClient

    overrides = straggler_overrides(args.agent, rollout_steps=args.rollout)
    env_id, env_kwargs = "lcpo/StragglerMitigation-v0", {"workload": args.workload}
    state = Path(tempfile.mkdtemp(prefix="lcpo-serve-straggler-"))
    port = _free_port()
    cmd = [sys.executable, "-m", "lcpo.cli.main", "serve", "--env", env_id, "--agent", args.agent,
           "--seed", str(args.seed), "--state", str(state), "--port", str(port), "--learn", args.learn,
           "--env-arg", f"workload={args.workload}", "--checkpoint-every", "0"]
    for k, v in overrides.items():
        cmd += ["--set", f"{k}={json.dumps(v)}"]
    server = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    client = ServeClient(f"http://127.0.0.1:{port}", timeout=120)
    for _ in range(900):
        try:
            client.status()
            break
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.2)

    # the load balancer: the simulator in this process, every decision from the server
    env = make_env(env_id, **env_kwargs)
    obs, _ = env.reset(seed=args.seed)
    http_actions, http_rewards, versions = [], [], []
    t0 = time.perf_counter()
    d = client.step("lb-0", obs)
    for _ in range(args.steps):
        http_actions.append(d["action"])
        versions.append(d["policy_version"])
        obs, reward, terminated, truncated, info = env.step(d["action"])
        http_rewards.append(float(reward))
        d = client.step("lb-0", obs, reward=reward, terminated=terminated, truncated=truncated,
                        info={"gamma": float(info["gamma"])})
    http_s = time.perf_counter() - t0
    http_metrics = env.unwrapped.run_metrics()
    status = client.status()
    client.close()
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=600)
    _, saved = RunCheckpoints(state / "checkpoint").load()

    # the same agent in process, same seed
    env2 = make_env(env_id, **env_kwargs)
    agent = AGENTS[args.agent](env2, seed=args.seed, **overrides)
    inproc_actions, inproc_rewards = [], []
    act, step = agent.act, env2.step
    agent.act = lambda o: (lambda a: (inproc_actions.append(int(a)), a)[1])(act(o))

    def _step(a):
        out = step(a)
        inproc_rewards.append(float(out[1]))
        return out

    env2.step = _step
    t0 = time.perf_counter()
    agent.learn(args.steps)
    inproc_s = time.perf_counter() - t0
    inproc_metrics = env2.unwrapped.run_metrics()

    same_actor = all(torch.equal(v, saved["agent"]["actor"][k]) for k, v in agent.actor.state_dict().items())
    same_critic = all(torch.equal(v, saved["agent"]["critic"][k]) for k, v in agent.critic.state_dict().items())
    a, b = np.asarray(http_actions), np.asarray(inproc_actions)
    out = {
        "agent": args.agent, "learn": args.learn, "steps": args.steps, "rollout_steps": args.rollout,
        "seed": args.seed, "workload": args.workload, "updates_server": saved["agent"]["updates"],
        "updates_in_process": agent.updates, "actions_equal_fraction": float((a == b).mean()),
        "first_differing_step": int(np.argmax(a != b)) if (a != b).any() else None,
        "mean_reward_http": float(np.mean(http_rewards)), "mean_reward_in_process": float(np.mean(inproc_rewards)),
        "actor_identical": same_actor, "critic_identical": same_critic,
        "http_steps_per_s": args.steps / http_s, "in_process_steps_per_s": args.steps / inproc_s,
        "run_metrics_http": http_metrics, "run_metrics_in_process": inproc_metrics,
        "server_status_steps": status["steps"],
    }
    print(json.dumps(out, indent=1, default=float))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=float))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
