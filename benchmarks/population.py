"""Throughput of whole populations (env + agents + loop) at N = 1, 4, 16, 64 seeds, one thread, and the memory of
64 LCPO seeds with 200k-state reservoirs (issue 26 item 6).

What is timed: :meth:`lcpo.online.population.Population.learn` (the population runtime: the vector env,
``act_batch``, ``observe_batch`` with every update on the agents' own schedule, the per-seed loop bookkeeping)
on ``lcpo/WindyPendulum-v0`` with trace ``wind-3`` (the native vector env where vecenv provides one), after
``--warmup`` untimed steps per seed; the figure is environment steps per second in all (N seed-steps per
population step), best of ``--repeats`` rounds (each round runs every configuration once, interleaved, so a
change of the machine's load hits all of them alike). Paths:

- ``solo``: today's single run (:class:`lcpo.online.loop.OnlineLoop`, one env, one agent), N = 1 only;
- ``generic``: the generic population (:class:`lcpo.agents.population.AgentPopulation`, N single agents);
- ``batch``: the batch-native population, for agents in :data:`lcpo.agents.population.BATCH_NATIVE`.

``--one-seed ROUNDS``: a population of one against the single run in one process, alternating rounds
(:func:`one_seed_side_by_side`), the check of "a population of one is no slower than today's single agent".

``--memory``: the resident set size of a population of ``--memory-seeds`` LCPO seeds with
``--reservoir``-state reservoirs, full (the reservoir arrays are allocated lazily by the OS, so they are filled
by writing states into them, as after 200k steps), measured after construction, after ``--memory-steps``
steps per seed (updates included, so the OOD sampling over the full reservoirs counts), and its peak including
one population checkpoint (every seed's generation written, as :func:`execute_population` does).

``--clock cpu`` (default) times with the process's CPU time (``time.process_time``: one thread, so what one
core gives, robust on a shared machine where other jobs take the core away); ``--clock wall`` with wall time.

``--device cuda`` (or ``cuda:N``, any torch device string; issue 26 item 6) adds a ``device`` path: the
batch-native population on that device (``Population(device=...)``: stacked networks, Adam state and update
tensors there, acting in torch there, the windy Pendulum vector env in its torch backend there), timed beside
the CPU paths in the same rounds; the clock is then wall time (GPU work is not process CPU time; every step
waits for its actions, so no work is left in flight when the clock stops), and ``--memory`` also reports the
device's peak allocated memory (measured on an H200: docs/benchmarks.md, "Populations on a device").
``--device-path`` runs the device code path on the CPU instead (what a GPU runs: torch acting, the torch env
backend, the stacked torch Fisher-vector products; :func:`lcpo.online.device.host_kernels` forced False) to show
that it works and what it costs there.

Usage::

    python benchmarks/population.py [--agents a2c lcpo] [--sizes 1 4 16 64] [--steps 2000] [--warmup 400]
        [--repeats 1] [--paths solo generic batch device] [--device cpu|cuda|cuda:N] [--device-path]
        [--one-seed ROUNDS] [--memory] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

ENV, TRACE, TRACE_LENGTH = "lcpo/WindyPendulum-v0", "wind-3", 100_000
CLOCK = time.process_time


def _overrides(agent: str) -> dict:
    # a reservoir that fills within the run, so LCPO's anchored (constrained) updates are part of the figure
    return {"reservoir_size": 2000} if agent.startswith("lcpo") else {}


def solo_rate(agent: str, steps: int, warmup: int, repeats: int) -> float:
    """Today's single run: env steps/s of one agent under OnlineLoop."""
    from lcpo.agents import AGENTS
    from lcpo.online.loop import OnlineLoop
    from lcpo.online.run import RunConfig, make_run_env

    best = 0.0
    for _ in range(repeats):
        cfg = RunConfig(agent=agent, trace=TRACE, trace_length=TRACE_LENGTH, overrides=_overrides(agent))
        env = make_run_env(cfg)
        loop = OnlineLoop(env, AGENTS[agent](env, seed=0, **cfg.overrides), seed=0)
        loop.run(warmup)
        t = CLOCK()
        loop.run(warmup + steps)
        best = max(best, steps / (CLOCK() - t))
    return best


def population_rate(agent: str, n: int, steps: int, warmup: int, repeats: int, batch: bool, device: str) -> float:
    """A population of ``n`` seeds: env steps/s in all."""
    from lcpo.online.population import Population

    best = 0.0
    for _ in range(repeats):
        pop = Population(agent, ENV, seeds=range(n), trace=TRACE, trace_length=TRACE_LENGTH, batch=batch,
                         device=device if batch else "cpu", **_overrides(agent))
        pop.learn(warmup)
        t = CLOCK()
        pop.learn(steps)
        _sync(device)
        best = max(best, n * steps / (CLOCK() - t))
    return best


def one_seed_side_by_side(agent: str, steps: int, warmup: int, rounds: int) -> dict:
    """A population of one against today's single run, in one process: the solo run (``OnlineLoop``, one env,
    one agent) and ``Population`` with one seed (the native vector env, ``PopulationLoop``) built once each,
    warmed up, then timed in alternating rounds of ``steps`` steps (so a change of the machine's load hits both
    alike); env steps/s per round, best and median over ``rounds``. Same agent code, same updates: the
    difference is the runtime around them (env stepping, loop bookkeeping, the agent's storage path)."""
    from lcpo.agents import AGENTS
    from lcpo.online.loop import OnlineLoop
    from lcpo.online.population import Population
    from lcpo.online.run import RunConfig, make_run_env

    cfg = RunConfig(agent=agent, trace=TRACE, trace_length=TRACE_LENGTH, overrides=_overrides(agent))
    env = make_run_env(cfg)
    loop = OnlineLoop(env, AGENTS[agent](env, seed=0, **cfg.overrides), seed=0)
    pop = Population(agent, ENV, seeds=[0], trace=TRACE, trace_length=TRACE_LENGTH, **_overrides(agent))
    loop.run(warmup)
    pop.learn(warmup)
    solo, one = [], []
    for _ in range(rounds):
        t = CLOCK()
        loop.run(loop.steps + steps)
        solo.append(steps / (CLOCK() - t))
        t = CLOCK()
        pop.learn(steps)
        one.append(steps / (CLOCK() - t))
    return {"solo_best": max(solo), "solo_median": float(np.median(solo)),
            "population_of_one_best": max(one), "population_of_one_median": float(np.median(one)),
            "rounds": rounds, "steps_per_round": steps}


def _sync(device: str) -> None:
    """Wait for the device's queued work (CUDA); nothing on the CPU."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def memory(seeds: int, reservoir: int, steps: int, batch: bool, device: str) -> dict:
    """RSS (MiB) of ``seeds`` LCPO seeds with full ``reservoir``-state reservoirs."""
    import psutil

    from lcpo.online.population import Population

    proc = psutil.Process()
    before = proc.memory_info().rss
    pop = Population("lcpo", ENV, seeds=range(seeds), trace=TRACE, trace_length=TRACE_LENGTH, batch=batch,
                     device=device if batch else "cpu", reservoir_size=reservoir)
    pop.learn(200)  # one update per seed: every array exists
    rng = np.random.default_rng(0)
    members = getattr(pop.agents, "members", None)
    reservoirs = [m.reservoir for m in members] if members is not None else list(getattr(pop.agents, "reservoirs"))
    for r in reservoirs:  # a full reservoir, as after `reservoir` steps: every page written
        r.data[:] = rng.standard_normal(r.data.shape, dtype=np.float32)
        r.seen = max(r.seen, r.capacity)
    full = proc.memory_info().rss
    pop.learn(steps)  # updates sample OOD anchors from the full reservoirs
    after = proc.memory_info().rss
    import resource
    import tempfile

    from lcpo.persistence.checkpoint import RunCheckpoints

    with tempfile.TemporaryDirectory() as tmp:  # a population checkpoint, as execute_population writes it
        loops = pop.loop.seed_states()
        t = time.perf_counter()
        for j in range(seeds):
            RunCheckpoints(f"{tmp}/s{j}").write_generation(pop.steps, {"agent": pop.agents.seed_state_dict(j),
                                                                      "loop": loops[j]})
        ckpt_s = time.perf_counter() - t
        ckpt_bytes = sum(f.stat().st_size for f in __import__("pathlib").Path(tmp).rglob("*") if f.is_file())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    extra = {}
    if device.startswith("cuda") and batch:
        extra["device_peak_allocated_mib"] = round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    return {**extra, "device": device if batch else "cpu", "seeds": seeds, "reservoir": reservoir,
            "path": "batch" if batch else "generic",
            "rss_start_mib": round(before / 2**20, 1), "rss_full_mib": round(full / 2**20, 1),
            "rss_after_updates_mib": round(after / 2**20, 1), "peak_rss_mib_incl_checkpoint": round(peak / 2**20, 1),
            "checkpoint_s": round(ckpt_s, 1), "checkpoint_mib": round(ckpt_bytes / 2**20, 1),
            "reservoir_bytes_mib": round(sum(r.data.nbytes for r in reservoirs) / 2**20, 1)}


def device_rate(agent: str, n: int, args) -> float:
    """The batch-native population on ``args.device`` (or the device code path on the CPU, ``--device-path``)."""
    if args.device != "cpu":
        return population_rate(agent, n, args.steps, args.warmup, 1, True, args.device)
    import lcpo.online.device as device_mod

    real = device_mod.host_kernels
    device_mod.host_kernels = lambda device: False
    try:
        return population_rate(agent, n, args.steps, args.warmup, 1, True, "cpu")
    finally:
        device_mod.host_kernels = real


def main() -> None:
    global CLOCK, TRACE, TRACE_LENGTH
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", nargs="*", default=["a2c", "lcpo"])
    p.add_argument("--sizes", nargs="+", type=int, default=[1, 4, 16, 64])
    p.add_argument("--steps", type=int, default=2000, help="timed steps per seed")
    p.add_argument("--warmup", type=int, default=400, help="untimed steps per seed first")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--paths", nargs="+", default=["solo", "generic", "batch", "device"],
                   choices=["solo", "generic", "batch", "device"],
                   help="device: the batch-native population on --device (only with --device other than cpu, "
                        "or --device-path)")
    p.add_argument("--device", default="cpu",
                   help="cpu (default), cuda, cuda:N or another torch device: the device path's device")
    p.add_argument("--device-path", action="store_true",
                   help="time the device code path on the CPU (torch acting, torch env, stacked torch Fisher products)")
    p.add_argument("--one-seed", type=int, default=0, metavar="ROUNDS",
                   help="also time a population of one against the single run side by side in one process, "
                        "this many alternating rounds of --steps steps (after --warmup)")
    p.add_argument("--memory", action="store_true", help="also measure 64 LCPO seeds' memory")
    p.add_argument("--memory-seeds", type=int, default=64)
    p.add_argument("--reservoir", type=int, default=200_000)
    p.add_argument("--memory-steps", type=int, default=400)
    p.add_argument("--batch-native", nargs="*", default=[], metavar="AGENT",
                   help="treat these agents as batch-native (their class has .population) even where "
                        "BATCH_NATIVE does not list them yet")
    p.add_argument("--trace", default=TRACE, help=f"trace (default {TRACE})")
    p.add_argument("--trace-length", type=int, default=TRACE_LENGTH)
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                   help="cpu: process CPU time (robust on a shared machine); wall: wall-clock time")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    from lcpo.online.device import resolve_device

    try:
        args.device = str(resolve_device(args.device, "--device"))
    except ValueError as exc:
        raise SystemExit(f"benchmarks/population.py: {exc}") from None
    on_device = args.device != "cpu" or args.device_path
    if args.device != "cpu" and args.clock == "cpu":
        args.clock = "wall"  # GPU time is not this process's CPU time
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    TRACE, TRACE_LENGTH = args.trace, args.trace_length
    if args.batch_native:
        import lcpo.agents.population as agent_pop

        agent_pop.BATCH_NATIVE = frozenset(agent_pop.BATCH_NATIVE | set(args.batch_native))
    import lcpo.agents.population as agent_pop

    BATCH_NATIVE = agent_pop.BATCH_NATIVE
    label = args.device if args.device != "cpu" else "cpu, device code path"
    results: dict = {"device": args.device, "device_path_on_cpu": bool(args.device_path), "steps": args.steps,
                     "warmup": args.warmup, "clock": args.clock, "rates": {}}
    if args.device.startswith("cuda"):
        results["device_name"] = torch.cuda.get_device_name(args.device)
    print(f"env steps/s in all, one thread, {ENV} trace {TRACE}, {args.steps} timed steps per seed after "
          f"{args.warmup}; best of {args.repeats}; {args.clock} clock; load average {os.getloadavg()[0]:.1f}; "
          f"batch-native: {sorted(BATCH_NATIVE) or 'none'}\n")
    header = "| agent | path | " + " | ".join(f"N={n}" for n in args.sizes) + " |"
    jobs = []  # (agent, path, n); every repeat runs each once, interleaved, so load changes hit all alike
    for agent in args.agents:
        if "solo" in args.paths:
            jobs.append((agent, "solo", 1))
        for path in ("generic", "batch", "device"):
            if path == "device" and not on_device:
                continue
            if path in args.paths and (path == "generic" or agent in BATCH_NATIVE):
                jobs += [(agent, path, n) for n in args.sizes]
    best: dict = {}
    for _ in range(args.repeats):
        for agent, path, n in jobs:
            if path == "solo":
                r = solo_rate(agent, args.steps, args.warmup, 1)
            elif path == "device":
                r = device_rate(agent, n, args)
            else:
                r = population_rate(agent, n, args.steps, args.warmup, 1, path == "batch", "cpu")
            best[(agent, path, n)] = max(best.get((agent, path, n), 0.0), r)
    print(header + "\n|" + "---|" * (2 + len(args.sizes)))
    for agent in args.agents:
        for path in ("solo", "generic", "batch", "device"):
            row = {n: best[(agent, path, n)] for n in args.sizes if (agent, path, n) in best}
            if not row:
                continue
            results["rates"][f"{agent}/{path}"] = row
            cells = [f"{row[n]:,.0f}" if n in row else "" for n in args.sizes]
            name = {"solo": "solo (single run)", "batch": "batch (cpu)", "device": f"batch ({label})"}.get(path, path)
            print(f"| {agent} | {name} | " + " | ".join(cells) + " |")
    if args.one_seed:
        results["one_seed"] = {}
        print("\n| agent | single run: best (median) | population of one: best (median) |\n|---|---|---|")
        for agent in args.agents:
            r = one_seed_side_by_side(agent, args.steps, args.warmup, args.one_seed)
            results["one_seed"][agent] = r
            print(f"| {agent} | {r['solo_best']:,.0f} ({r['solo_median']:,.0f}) | {r['population_of_one_best']:,.0f} "
                  f"({r['population_of_one_median']:,.0f}) |", flush=True)
    if args.memory:
        m = memory(args.memory_seeds, args.reservoir, args.memory_steps, "lcpo" in BATCH_NATIVE, args.device)
        results["memory"] = m
        print(f"\nmemory: {json.dumps(m)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
