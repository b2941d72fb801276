"""Act latency and sustained decisions/s of ``lcpo serve`` over loopback, while updates run.

A server is started as a separate process (``lcpo serve``, its default ``--learn``; fsync ``interval``) on the
straggler environment's spaces (32 observations, 9 actions; the perm-invariant network) with LCPO and a short
rollout (``--rollout``, default 512), so policy updates run in the background throughout. The load generator
is a minimal asyncio HTTP/1.1 client (one keep-alive connection per stream, one request in flight per stream,
each request a ``POST /v1/step`` carrying the previous action's reward). It is kept light so that the server,
not the client, is measured: the request bodies are encoded before the clock starts (a pool of 512
observations and rewards per row, cycled), each connection is a plain :class:`asyncio.Protocol` that parses
the answer's ``Content-Length`` itself, and the client's own CPU use is reported in every row (``client CPU``:
a client well under one core was waiting for the server, not the other way round).

Two measurements:

1. **Latency at a fixed rate**: ``--rate`` decisions/s in total (default 1,000) spread over 1, 8 and 64
   concurrent streams, each stream sending on a fixed schedule; latency is from sending a request to reading
   its whole answer (a request sent late because the previous one of its stream was slow is timed from its
   send, and the achieved rate is reported next to the target).
2. **Sustained throughput**: 64 streams sending ``/v1/step`` as fast as answers come back, for ``--seconds``;
   and 256 streams carried by 4 connections, each sending ``POST /v1/batch`` with one step of 64 streams
   (a proxy that gathers its pending decisions into one request); latency is then per batch.

Each row also reports the updates that ran during it, and the server's CPU time per decision (``/proc``; learning
included: the server process and, with ``--learn process``, its learner process), which says what the server
would sustain with its CPUs to itself, and the serving process's share of it alone.

**Side by side** (``--base-src DIR``): a second server is started from another source tree (``PYTHONPATH=DIR``,
e.g. ``git archive BASE src | tar -x -C /tmp/base`` then ``--base-src /tmp/base/src``), and every row is run
on both servers, one after the other, with the other server idle (its learner caught up first), so both see the
same machine load. Usage::

    python benchmarks/serve_latency.py [--seconds 10] [--rate 1000] [--rollout 512] [--base-src DIR] [--json out.json]

Prints a Markdown table (the one in ``docs/serving.md``). Numbers depend on the machine and its load; the
load average at the start is printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

POOL = 512  # pre-encoded observations (and rewards) per row, cycled
ROWS = ("paced1", "paced8", "paced64", "flat64", "batch256")  # the rows, in order (--rows)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bodies(rng: np.random.Generator) -> tuple[list[bytes], list[bytes]]:
    """``POOL`` JSON-encoded straggler observations (32 numbers in [0, 2], 3 decimals) and rewards in (-1, 0]."""
    obs = [json.dumps(o).encode() for o in rng.uniform(0.0, 2.0, (POOL, 32)).round(3).tolist()]
    rewards = [json.dumps(r).encode() for r in (-rng.random(POOL)).tolist()]
    return obs, rewards


class Conn(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection with one request in flight (a minimal client: the answer is complete
    when its ``Content-Length`` bytes after the header have arrived)."""

    def __init__(self):
        self.buf = bytearray()
        self.waiter: asyncio.Future | None = None
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0 or self.waiter is None:
            return
        head = bytes(self.buf[:end])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(self.buf) >= end + 4 + length:
            body = bytes(self.buf[end + 4:end + 4 + length])
            del self.buf[:end + 4 + length]
            waiter, self.waiter = self.waiter, None
            waiter.set_result((head, body))

    def connection_lost(self, exc) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError(f"the server closed the connection ({exc})"))

    async def request(self, data: bytes) -> float:
        """Send one request, wait for its whole answer; returns the latency in seconds.

        Raises:
            RuntimeError: the server answered anything but 200.
        """
        self.waiter = asyncio.get_running_loop().create_future()
        t0 = time.perf_counter()
        self.transport.write(data)
        head, body = await self.waiter
        dt = time.perf_counter() - t0
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"server answered {head.splitlines()[0]!r}: {body[:200]!r}")
        return dt


def _http(path: bytes, body: bytes) -> bytes:
    return (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (path, len(body))) + body


class Stream:
    """One connection driving ``width`` streams: ``/v1/step`` of one stream (width 0), or ``/v1/batch`` with one
    step of each of ``width`` streams."""

    def __init__(self, name: str, port: int, pool: tuple[list[bytes], list[bytes]], width: int = 0):
        self.names = [f"{name}-{k}".encode() for k in range(max(width, 1))]
        self.port, self.width = port, width
        self.obs, self.rewards = pool
        self.k = 0

    async def connect(self) -> None:
        _, self.conn = await asyncio.get_running_loop().create_connection(Conn, "127.0.0.1", self.port)

    def _step_body(self, name: bytes) -> bytes:
        k = self.k = self.k + 1
        o = self.obs[k % POOL]
        if k <= len(self.names):  # each stream's first step: reward null
            return b'{"stream":"%s","obs":%s}' % (name, o)
        return b'{"stream":"%s","obs":%s,"reward":%s,"info":{"gamma":0.9}}' % (name, o, self.rewards[k % POOL])

    def next_request(self) -> bytes:
        """The encoded next request of this connection."""
        if not self.width:
            return _http(b"/v1/step", self._step_body(self.names[0]))
        return _http(b"/v1/batch", b'{"steps":[%s]}' % b",".join(self._step_body(n) for n in self.names))

    async def step(self, request: bytes | None = None) -> float:
        """Send one request (``request``, or the next one encoded now); returns the latency in seconds."""
        return await self.conn.request(self.next_request() if request is None else request)


async def _paced(streams, rate_per_stream: float, seconds: float, requests) -> list[float]:
    lat: list[float] = []

    async def run(s: Stream, reqs: list[bytes], offset: float) -> None:
        period = 1.0 / rate_per_stream
        start = time.perf_counter() + offset
        for k, req in enumerate(reqs):
            due = start + k * period
            if due - start > seconds:
                return
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            lat.append(await s.step(req))

    n = len(streams)
    await asyncio.gather(*(run(s, r, i / (n * rate_per_stream)) for i, (s, r) in enumerate(zip(streams, requests))))
    return lat


async def _flat_out(streams, seconds: float, requests) -> list[float]:
    lat: list[float] = []
    end = time.perf_counter() + seconds

    async def run(s: Stream, reqs: list[bytes]) -> None:
        for req in reqs:
            if time.perf_counter() >= end:
                return
            lat.append(await s.step(req))
        raise RuntimeError("the pre-encoded requests ran out before the row ended (raise the estimate)")

    await asyncio.gather(*(run(s, r) for s, r in zip(streams, requests)))
    return lat


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) used so far by process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (a server's learner process; Linux ``/proc``)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _tree_cpu_s(pid: int, children: list[int]) -> tuple[float, float]:
    """``(server process, its child processes)`` CPU seconds used so far."""
    kids = 0.0
    for c in children:
        try:
            kids += _cpu_s(c)
        except OSError:
            pass
    return _cpu_s(pid), kids


def _status(port: int) -> dict:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/status", timeout=10) as r:
        return json.loads(r.read())


def _settle(ports, timeout: float = 120.0) -> None:
    """Wait until every server's learner has consumed its log (no update running), so an idle server takes no
    CPU from the measured one."""
    deadline = time.monotonic() + timeout
    for port in ports:
        while time.monotonic() < deadline:
            s = _status(port)
            if s["records"] == s["learner_position"] and s.get("learner_ready", True):
                break
            time.sleep(0.1)


async def _measure(port: int, n_streams: int, seconds: float, rate: float | None, tag: str, batch: int = 0,
                   pid: int = 0) -> dict:
    rng = np.random.default_rng(n_streams)
    pool = _bodies(rng)
    if batch:
        streams = [Stream(f"{tag}-{i}", port, pool, batch) for i in range(n_streams // batch)]
    else:
        streams = [Stream(f"{tag}-{n_streams}-{i}", port, pool) for i in range(n_streams)]
    for s in streams:
        await s.connect()
        await s.step()  # the stream's first step (reward null)
    # every request of the row, encoded before the clock starts (a generous bound on how many can be sent)
    per_conn = int(seconds * (rate / n_streams if rate else 60_000 / n_streams)) + 2
    requests = [[s.next_request() for _ in range(per_conn)] for s in streams]
    before = _status(port)
    kids = _children(pid)  # a learner process (--learn process): its CPU counts as the server's
    (cpu0, kid0), client0 = _tree_cpu_s(pid, kids), time.process_time()
    t0 = time.perf_counter()
    lat = await (_paced(streams, rate / n_streams, seconds, requests) if rate else
                 _flat_out(streams, seconds, requests))
    wall = time.perf_counter() - t0
    (cpu1, kid1), client = _tree_cpu_s(pid, kids), time.process_time() - client0
    own, learner = cpu1 - cpu0, kid1 - kid0
    cpu = own + learner
    after = _status(port)
    for s in streams:
        s.conn.transport.close()
    ms = np.asarray(lat) * 1e3
    decisions = len(lat) * max(batch, 1)
    return {"streams": n_streams, "batch": batch, "target_per_s": rate,
            "achieved_per_s": decisions / wall,
            "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "max_ms": float(ms.max()), "requests": len(lat),
            "server_cpu_us_per_decision": cpu / decisions * 1e6, "server_cpu_share": cpu / wall,
            "serving_process_cpu_us_per_decision": own / decisions * 1e6, "learner_process_cpu_share": learner / wall,
            "client_cpu_share": client / wall, "updates": after["updates"] - before["updates"],
            "last_update_s": after["last_update_s"], "learner_lag_end": after["records"] - after["learner_position"]}


def _run(coro):
    try:
        import uvloop  # installed with lcpo[serve]; the faster event loop keeps the load generator lighter
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def _start(args, src: str | None, port: int) -> subprocess.Popen:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(Path(src).resolve())
    state = tempfile.mkdtemp(prefix="lcpo-serve-bench-")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lcpo.cli.main", "serve", "--env", "lcpo/StragglerMitigation-v0", "--agent", args.agent,
         "--set", f"rollout_steps={args.rollout}", "--set", "normalize_returns=false", "--state", state,
         "--port", str(port), "--fsync", args.fsync, "--checkpoint-every", "10",
         *(shlex.split(args.server_args) if src is None else [])],
        stderr=subprocess.DEVNULL, env=env)
    proc.state_dir = state  # removed once the server has exited
    return proc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0, help="seconds per measurement")
    p.add_argument("--rate", type=float, default=1000.0, help="decisions/s of the fixed-rate rows")
    p.add_argument("--rollout", type=int, default=512, help="rollout_steps of the served LCPO agent")
    p.add_argument("--agent", default="lcpo")
    p.add_argument("--fsync", default="interval", choices=("always", "interval", "never"))
    p.add_argument("--base-src", default=None,
                   help="also measure a server run from this source tree (its src folder), row by row")
    p.add_argument("--server-args", default="", metavar="ARGS",
                   help="extra `lcpo serve` options for this tree's server (e.g. '--switch-interval 0.0002')")
    p.add_argument("--rows", default=",".join(ROWS), help=f"rows to measure, of {','.join(ROWS)} (default all)")
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = p.parse_args(argv)

    codes = [("this tree", None)] + ([("base", args.base_src)] if args.base_src else [])
    servers = {}
    try:
        for name, src in codes:
            port = _free_port()
            servers[name] = (port, _start(args, src, port))
        for name, (port, proc) in servers.items():
            for _ in range(600):
                if proc.poll() is not None:
                    raise RuntimeError(f"the {name} server exited with {proc.returncode} while starting")
                try:
                    _status(port)
                    break
                except OSError:
                    time.sleep(0.2)
        load = os.getloadavg()
        ports = [port for port, _ in servers.values()]
        plan = [(1, args.rate, 0), (8, args.rate, 0), (64, args.rate, 0), (64, None, 0), (256, None, 64)]
        plan = [row for name, row in zip(ROWS, plan) if name in args.rows.split(",")]
        rows = []
        for k, (n, rate, batch) in enumerate(plan):
            order = list(servers.items())
            if k % 2:  # alternate which server goes first
                order.reverse()
            for name, (port, proc) in order:
                _settle(ports)
                tag = "batch" if batch else ("paced" if rate else "flat")
                row = _run(_measure(port, n, args.seconds, rate, tag, batch=batch, pid=proc.pid))
                row["code"] = name
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        for _, proc in servers.values():
            proc.terminate()
        for _, proc in servers.values():
            proc.wait(timeout=120)
            shutil.rmtree(proc.state_dir, ignore_errors=True)
    print(f"lcpo serve, {args.agent} on the straggler spaces (rollout {args.rollout}, fsync {args.fsync}"
          f"{', this tree with ' + args.server_args if args.server_args else ''}), "
          f"{os.cpu_count()} CPUs, load average {load[0]:.1f} at start, {args.seconds:g} s per row\n")
    code_col = "| code " if len(servers) > 1 else ""
    print(f"{code_col}| streams | requests | target decisions/s | achieved decisions/s | p50 ms | p99 ms | max ms | "
          "updates during row | server CPU per decision (µs, learning included) | "
          "of which the serving process (µs) | server CPU used (cores) | client CPU used (cores) |")
    print("|---" * (12 + bool(code_col)) + "|")
    rows.sort(key=lambda r: (plan.index(next(x for x in plan if x[0] == r["streams"] and x[1] == r["target_per_s"]
                                             and x[2] == r["batch"])), r["code"] != "base"))
    for r in rows:
        target = "as fast as possible" if r["target_per_s"] is None else f"{r['target_per_s']:,.0f}"
        kind = f"/v1/batch of {r['batch']}, {r['streams'] // r['batch']} in flight" if r["batch"] else "/v1/step"
        code = f"| {r['code']} " if code_col else ""
        print(f"{code}| {r['streams']} | {kind} | {target} | {r['achieved_per_s']:,.0f} | {r['p50_ms']:.2f} | "
              f"{r['p99_ms']:.2f} | {r['max_ms']:.1f} | {r['updates']} | {r['server_cpu_us_per_decision']:.0f} | "
              f"{r['serving_process_cpu_us_per_decision']:.0f} | "
              f"{r['server_cpu_share']:.2f} | {r['client_cpu_share']:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({"load_average": load, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
