"""Act latency and sustained decisions/s of ``lcpo serve`` over loopback, while updates run.

A server is started as a separate process (``lcpo serve --learn background``, fsync ``interval``) on the
straggler environment's spaces (32 observations, 9 actions; the perm-invariant network) with LCPO and a short
rollout (``--rollout``, default 512), so policy updates run in the background throughout. The load generator
is a minimal asyncio HTTP/1.1 client (one keep-alive connection per stream, one request in flight per stream,
each request a ``POST /v1/step`` carrying the previous action's reward), cheaper than httpx so that it takes
less of the shared CPUs from the server.

Two measurements:

1. **Latency at a fixed rate**: ``--rate`` decisions/s in total (default 1,000) spread over 1, 8 and 64
   concurrent streams, each stream sending on a fixed schedule; latency is from sending a request to reading
   its whole answer (a request sent late because the previous one of its stream was slow is timed from its
   send, and the achieved rate is reported next to the target).
2. **Sustained throughput**: 64 streams sending ``/v1/step`` as fast as answers come back, for ``--seconds``;
   and 256 streams carried by 4 connections, each sending ``POST /v1/batch`` with one step of 64 streams
   (a proxy that gathers its pending decisions into one request); latency is then per batch.

Each row also reports the updates that ran during it, and the server process's CPU time per decision
(``/proc``; learning included), which says what the server would sustain with its CPUs to itself. Usage::

    python benchmarks/serve_latency.py [--seconds 10] [--rate 1000] [--rollout 512] [--json out.json]

Prints a Markdown table (the one in ``docs/serving.md``). Numbers depend on the machine and its load; the
load average at the start is printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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


class Stream:
    """One keep-alive connection driving one stream with ``POST /v1/step``."""

    def __init__(self, name: str, port: int, rng: np.random.Generator):
        self.name, self.port, self.rng = name, port, rng
        self.first = True

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    def _request(self) -> bytes:
        obs = self.rng.uniform(0.0, 2.0, 32).round(3).tolist()
        body = {"stream": self.name, "obs": obs}
        if not self.first:
            body["reward"] = float(-self.rng.random())
            body["info"] = {"gamma": 0.9}
        self.first = False
        data = json.dumps(body).encode()
        return (b"POST /v1/step HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(data)) + data

    async def step(self) -> float:
        """Send one step, read its answer; returns the latency in seconds."""
        req = self._request()
        t0 = time.perf_counter()
        self.writer.write(req)
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        body = await self.reader.readexactly(length)
        dt = time.perf_counter() - t0
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"server answered {head.splitlines()[0]!r}: {body[:200]!r}")
        return dt


class BatchStream(Stream):
    """One connection carrying ``width`` streams, all stepped by each ``POST /v1/batch``."""

    def __init__(self, name: str, port: int, rng: np.random.Generator, width: int):
        super().__init__(name, port, rng)
        self.width = width

    def _request(self) -> bytes:
        steps = []
        for k in range(self.width):
            body = {"stream": f"{self.name}-{k}", "obs": self.rng.uniform(0.0, 2.0, 32).round(3).tolist()}
            if not self.first:
                body["reward"] = float(-self.rng.random())
                body["info"] = {"gamma": 0.9}
            steps.append(body)
        self.first = False
        data = json.dumps({"steps": steps}).encode()
        return (b"POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(data)) + data


async def _paced(streams, rate_per_stream: float, seconds: float) -> list[float]:
    lat: list[float] = []

    async def run(s: Stream, offset: float) -> None:
        period = 1.0 / rate_per_stream
        start = time.perf_counter() + offset
        k = 0
        while True:
            due = start + k * period
            if due - start > seconds:
                return
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            lat.append(await s.step())
            k += 1

    n = len(streams)
    await asyncio.gather(*(run(s, i / (n * rate_per_stream)) for i, s in enumerate(streams)))
    return lat


async def _flat_out(streams, seconds: float) -> list[float]:
    lat: list[float] = []
    end = time.perf_counter() + seconds

    async def run(s: Stream) -> None:
        while time.perf_counter() < end:
            lat.append(await s.step())

    await asyncio.gather(*(run(s) for s in streams))
    return lat


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) used so far by process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _status(port: int) -> dict:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/status", timeout=10) as r:
        return json.loads(r.read())


async def _measure(port: int, n_streams: int, seconds: float, rate: float | None, tag: str, batch: int = 0,
                   pid: int = 0) -> dict:
    rng = np.random.default_rng(n_streams)
    if batch:
        streams = [BatchStream(f"{tag}-{i}", port, rng, batch) for i in range(n_streams // batch)]
    else:
        streams = [Stream(f"{tag}-{n_streams}-{i}", port, rng) for i in range(n_streams)]
    for s in streams:
        await s.connect()
        await s.step()  # the stream's first step (reward null)
    before = _status(port)
    cpu0 = _cpu_s(pid)
    t0 = time.perf_counter()
    lat = await (_paced(streams, rate / n_streams, seconds) if rate else _flat_out(streams, seconds))
    wall = time.perf_counter() - t0
    cpu = _cpu_s(pid) - cpu0
    after = _status(port)
    for s in streams:
        s.writer.close()
    ms = np.asarray(lat) * 1e3
    return {"streams": n_streams, "batch": batch, "target_per_s": rate,
            "achieved_per_s": len(lat) * max(batch, 1) / wall,
            "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "max_ms": float(ms.max()), "requests": len(lat),
            "server_cpu_us_per_decision": cpu / (len(lat) * max(batch, 1)) * 1e6, "server_cpu_share": cpu / wall, "updates": after["updates"] - before["updates"],
            "last_update_s": after["last_update_s"], "learner_lag_end": after["records"] - after["learner_position"]}


def _run(coro):
    try:
        import uvloop  # installed with lcpo[serve]; the faster event loop keeps the load generator lighter
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0, help="seconds per measurement")
    p.add_argument("--rate", type=float, default=1000.0, help="decisions/s of the fixed-rate rows")
    p.add_argument("--rollout", type=int, default=512, help="rollout_steps of the served LCPO agent")
    p.add_argument("--agent", default="lcpo")
    p.add_argument("--fsync", default="interval", choices=("always", "interval", "never"))
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = p.parse_args(argv)

    port = _free_port()
    state = tempfile.mkdtemp(prefix="lcpo-serve-bench-")
    server = subprocess.Popen(
        [sys.executable, "-m", "lcpo.cli.main", "serve", "--env", "lcpo/StragglerMitigation-v0", "--agent", args.agent,
         "--set", f"rollout_steps={args.rollout}", "--set", "normalize_returns=false", "--state", state,
         "--port", str(port), "--fsync", args.fsync, "--checkpoint-every", "10"],
        stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                _status(port)
                break
            except OSError:
                time.sleep(0.2)
        load = os.getloadavg()
        rows = []
        for n in (1, 8, 64):
            rows.append(_run(_measure(port, n, args.seconds, args.rate, "paced", pid=server.pid)))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        rows.append(_run(_measure(port, 64, args.seconds, None, "flat", pid=server.pid)))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        rows.append(_run(_measure(port, 256, args.seconds, None, "batch", batch=64, pid=server.pid)))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait(timeout=120)
    print(f"lcpo serve, {args.agent} on the straggler spaces (rollout {args.rollout}, fsync {args.fsync}), "
          f"{os.cpu_count()} CPUs, load average {load[0]:.1f} at start, {args.seconds:g} s per row\n")
    print("| streams | requests | target decisions/s | achieved decisions/s | p50 ms | p99 ms | max ms | "
          "updates during row | server CPU per decision (µs, learning included) | server CPU used (cores) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        target = "as fast as possible" if r["target_per_s"] is None else f"{r['target_per_s']:,.0f}"
        kind = f"/v1/batch of {r['batch']}, {r['streams'] // r['batch']} in flight" if r["batch"] else "/v1/step"
        print(f"| {r['streams']} | {kind} | {target} | {r['achieved_per_s']:,.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
              f"{r['max_ms']:.1f} | {r['updates']} | {r['server_cpu_us_per_decision']:.0f} | {r['server_cpu_share']:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({"load_average": load, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
