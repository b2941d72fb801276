"""``lcpo serve``: a live policy server that keeps learning (HTTP/JSON; docs/serving.md)."""

from __future__ import annotations

import argparse
import ipaddress
from pathlib import Path

__all__ = ["add_parser", "bind_socket", "cmd_serve", "is_loopback", "read_token", "SWITCH_INTERVAL_S"]

#: ``sys.setswitchinterval`` of a server (seconds). With ``--learn thread`` the learner is a thread of the server
#: process: while an update runs, a request waits up to this long for the GIL when it arrives and again after the
#: log write (which releases it). Python's default, 5 ms, would put 10 ms on such a request; 0.5 ms is the default
#: here. With ``--learn process`` it bounds the waits on the server's own threads (log sync, snapshot receiver).
SWITCH_INTERVAL_S = 0.0005


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``); False for any other host."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(path: Path) -> str:
    """The bearer token in ``path`` (surrounding whitespace removed).

    Raises:
        ValueError: the file is missing, holds fewer than 16 characters, or holds whitespace inside the token.
    """
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ValueError(f"token file {path} does not exist") from None
    except UnicodeDecodeError:
        raise ValueError(f"token file {path} is not UTF-8 text") from None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise ValueError(f"token file {path} must hold one token of at least 16 characters without spaces "
                         "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))' > FILE`)")
    return token


def bind_socket(host: str, port: int):
    """A TCP socket bound to ``host:port`` (not yet listening), as uvicorn binds one: IPv6 for a host with a
    colon, else IPv4, ``SO_REUSEADDR``. The CLI binds it before it touches the state folder or starts the
    learner, and hands it to uvicorn.

    Raises:
        ValueError: the address cannot be bound (in use, not this machine's, a privileged port), naming the
            host, the port and the reason.
    """
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family=family)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except (OSError, UnicodeError) as exc:
        sock.close()
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ValueError(f"cannot listen on {host} port {port}: {reason[:1].lower()}{reason[1:]}") from None
    return sock


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``serve`` command."""
    p = subparsers.add_parser(
        "serve", help="serve an agent over HTTP/JSON to a live system, learning as it runs",
        description="Serve an on-policy agent (a2c, lcpo, trpo, ppo, lcpo-p, clear, tabular-a2c) to live systems in "
                    "any language over HTTP/JSON: POST /v1/step (one round trip per step), /v1/act + /v1/observe "
                    "(rewards known later), GET /v1/status, /metrics, /openapi.json. Every accepted request is "
                    "in an append-only log under --state before it is answered; checkpoints are atomic; a restart "
                    "on the same --state continues exactly. Needs `pip install 'lcpo[serve]'` (a source checkout: "
                    "`pip install -e '.[serve]'`). docs/serving.md.")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--env", metavar="ID", help="environment id giving the spaces and context entries (never "
                                                 "stepped by the server)")
    what.add_argument("--spec", type=Path, metavar="FILE",
                      help="JSON spec of a system without a Gymnasium env: observation size/bounds, action space, "
                           "context entries (docs/serving.md)")
    p.add_argument("--agent", required=True, metavar="NAME", help="agent name")
    p.add_argument("--seed", type=int, default=0, help="seed (network initialisation and acting noise)")
    p.add_argument("--set", dest="overrides", action="append", metavar="KEY=VALUE",
                   help="agent hyperparameter override, VALUE in JSON (repeatable)")
    p.add_argument("--env-arg", dest="env_kwargs", action="append", metavar="KEY=VALUE",
                   help="environment argument (repeatable)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any non-loopback "
                                                        "address requires --token-file)")
    p.add_argument("--port", type=int, default=8765, help="port, 1-65535 (default 8765)")
    p.add_argument("--state", type=Path, required=True, metavar="DIR",
                   help="state folder: log, checkpoints (one server per folder; a restart continues it)")
    p.add_argument("--token-file", type=Path, default=None,
                   help="file holding a bearer token that every request must send (Authorization: Bearer ...)")
    p.add_argument("--fsync", choices=("always", "interval", "never"), default="interval",
                   help="when the log is flushed to disk: before every answer, every --fsync-interval seconds "
                        "(default), or when the kernel decides; kill -9 loses nothing acknowledged under any")
    p.add_argument("--fsync-interval", type=float, default=0.05, metavar="S",
                   help="seconds, at most 3600 (default 0.05)")
    p.add_argument("--checkpoint-every", type=int, default=1, metavar="N",
                   help="updates between checkpoints (default 1; 0: only at shutdown)")
    p.add_argument("--learn", choices=("process", "thread", "inline", "background"), default="process",
                   help="process (default): the learner runs in its own process and acting answers from the latest "
                        "published policy, never waiting; thread (formerly 'background'): the same in a thread of "
                        "the server; inline: a request that completes a rollout waits for its update (bit-exact "
                        "with in-process learning)")
    p.add_argument("--learner-nice", type=int, default=10, metavar="N",
                   help="with --learn process: niceness the learner process adds to its own (0-19, default 10), so "
                        "that under CPU contention answers come first and the learner lags")
    p.add_argument("--resume-learner", choices=("retry", "skip"), default=None,
                   help="after a learner failure recorded in --state (learner-failure.json; the server then acts "
                        "from the last good policy and does not learn): retry learning from the record it failed "
                        "on (after a fix), or skip the rollout whose update failed and learn on (docs/serving.md)")
    p.add_argument("--keep-log", action="store_true", help="keep log segments that a checkpoint already covers")
    p.add_argument("--max-body", type=int, default=65536, metavar="BYTES", help="largest request body")
    p.add_argument("--max-streams", type=int, default=10_000, help="streams held at once")
    p.add_argument("--max-outstanding", type=int, default=1024, help="outstanding decisions per stream")
    p.add_argument("--switch-interval", type=float, default=SWITCH_INTERVAL_S, metavar="S",
                   help=f"Python's thread switch interval (default {SWITCH_INTERVAL_S}): while an update runs, the "
                        "acting path waits up to this long for the interpreter each time it released it")
    p.set_defaults(func=cmd_serve)
    return p


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server until SIGTERM/SIGINT (then drain, checkpoint and exit 0; 1 if the learner had failed, as
    then there is no final checkpoint).

    Raises:
        ValueError: a non-loopback ``--host`` without ``--token-file``, a bad token file, spec or option.
    """
    token = None if args.token_file is None else read_token(args.token_file)
    if not is_loopback(args.host) and token is None:
        raise ValueError(f"--host {args.host} is not a loopback address: binding it requires --token-file (a "
                         "bearer token every request must send)")
    for name in ("max_body", "max_streams", "max_outstanding"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not 1e-6 <= args.switch_interval <= 0.1:
        raise ValueError(f"--switch-interval must be in [1e-06, 0.1] seconds, got {args.switch_interval}")
    if not 0 <= args.learner_nice <= 19:
        raise ValueError(f"--learner-nice must be in [0, 19], got {args.learner_nice}")
    if args.seed < 0:
        raise ValueError(f"--seed must be a non-negative integer, got {args.seed}")
    if not 0 < args.fsync_interval <= 3600:
        raise ValueError(f"--fsync-interval must be in (0, 3600] seconds, got {args.fsync_interval}")
    if args.checkpoint_every < 0:
        raise ValueError(f"--checkpoint-every must be >= 0, got {args.checkpoint_every}")
    if not 1 <= args.port <= 65535:  # 0 would bind a port the server cannot tell its clients
        raise ValueError(f"--port must be in [1, 65535], got {args.port}")
    try:
        import uvicorn
    except ImportError:
        raise ValueError("lcpo serve needs its extra: pip install 'lcpo[serve]' (from a source checkout: "
                         "pip install -e '.[serve]')") from None
    import signal
    import sys

    from lcpo.cli.run import parse_assignments
    from lcpo.serve.app import ServeConfig, Server, create_app
    from lcpo.serve.http import http_protocol
    from lcpo.serve.spec import load_spec

    cfg = ServeConfig(agent=args.agent, env=args.env, spec=None if args.spec is None else load_spec(args.spec),
                      seed=args.seed, overrides=parse_assignments(args.overrides, "--set"),
                      env_kwargs=parse_assignments(args.env_kwargs, "--env-arg"), state_dir=str(args.state),
                      fsync=args.fsync, fsync_interval_s=args.fsync_interval, checkpoint_every=args.checkpoint_every,
                      learn=args.learn, keep_log=args.keep_log, max_body=args.max_body, max_streams=args.max_streams,
                      max_outstanding=args.max_outstanding, token=token, learner_nice=args.learner_nice,
                      resume_learner=args.resume_learner)
    sys.setswitchinterval(args.switch_interval)  # other threads yield the GIL to the acting path
    sock = bind_socket(args.host, args.port)  # before the state folder and the learner: a taken port stops here
    try:
        server = Server(cfg, say=lambda line: print(line, file=sys.stderr, flush=True))
    except KeyboardInterrupt:  # Ctrl-C while the agent is built or the log replayed: nothing was served
        sock.close()
        print(f"lcpo serve: interrupted while starting; nothing was answered (a restart on --state {args.state} "
              "continues it)", file=sys.stderr, flush=True)
        return 130
    except BaseException:
        sock.close()
        raise
    try:
        # httptools with one socket write per answer and the decisions answered without an ASGI cycle
        # (lcpo.serve.http), uvloop if installed, no access log, no
        # X-Forwarded-For rewriting (no proxy is trusted) and no Server header: less work per decision
        app = create_app(server)
        config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning",
                                access_log=False, lifespan="on", timeout_graceful_shutdown=30,
                                limit_concurrency=4096, backlog=2048, http=http_protocol(app), loop="auto",
                                proxy_headers=False, server_header=False)
        url_host = f"[{args.host}]" if ":" in args.host and not args.host.startswith("[") else args.host
        print(f"lcpo serve: {args.agent} on {args.env or args.spec} at http://{url_host}:{args.port} "
              f"(state {args.state}: {server.replayed} log records replayed, policy version "
              f"{server.learner.snapshot.version})", file=sys.stderr, flush=True)
        if server.resumed is not None:
            what = ("learning from that record again" if args.resume_learner == "retry" else
                    "the rollout whose update failed there is dropped")
            print(f"lcpo serve: --resume-learner {args.resume_learner}: {what} ({server.resumed})", file=sys.stderr,
                  flush=True)
        if server.restored_failure is not None and server.learner.error is server.restored_failure:
            # a failure recorded in the state folder (a new one, found while starting or later, is told by the
            # server's `say` when it happens, from whichever thread finds it): acting goes on
            print(f"lcpo serve: not learning: {server.learner.error}; acting from policy version "
                  f"{server.learner.snapshot.version} (restart with --resume-learner retry or skip, docs/serving.md)",
                  file=sys.stderr, flush=True)
        # uvicorn drains on SIGTERM and SIGINT (Ctrl-C), runs the lifespan shutdown (learner drained,
        # checkpoint), restores the handlers it found and raises the signal again: these no-op handlers turn
        # that into a normal exit 0 (Python's own SIGINT handler would raise KeyboardInterrupt there)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: None)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        server.close()
    if server.close_error is not None:  # raised in uvicorn's lifespan shutdown, which only logs it
        from lcpo.serve.learner import LearnerFailure

        resume = ("; restart with --resume-learner retry or skip to learn again (docs/serving.md)"
                  if isinstance(server.learner.error, LearnerFailure) else "")
        print(f"lcpo serve: stopped without a final checkpoint ({server.close_error}); a restart on the same "
              f"--state replays the log{resume}", file=sys.stderr, flush=True)
        return 1
    at = server.learner.checkpointed_at  # -1: none taken (no --state folder to keep it in)
    saved = f"checkpoint of the first {at:,} log records" if at >= 0 else "no checkpoint taken"
    print(f"lcpo serve: stopped after {server.state.transitions} steps, {server.learner.updates} updates; {saved}",
          file=sys.stderr, flush=True)
    return 0
