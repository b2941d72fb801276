"""The serving fast paths change speed, not behaviour: one socket write per answer with the same bytes, the
orjson parser deciding exactly as ``json.loads``, the fast observation check accepting and refusing exactly as
the full one, and the published snapshot acting exactly as the agent's own acting path."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from lcpo.serve.protocol import DuplicateKeyError, RequestError, Spaces, dumps, loads

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class _Recorder:
    """A transport that records what is written to it."""

    def __init__(self):
        self.events: list = []

    def write(self, data: bytes) -> None:
        self.events.append(bytes(data))

    def close(self) -> None:
        self.events.append("close")

    def get_extra_info(self, name, default=None):
        return f"extra {name}"


def test_one_write_transport_sends_header_and_body_together_and_never_holds_past_the_iteration():
    from lcpo.serve.http import OneWriteTransport

    loop = asyncio.new_event_loop()
    try:
        raw = _Recorder()
        t = OneWriteTransport(raw, loop)
        head, body = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n", b"{}"
        t.write(head)
        assert raw.events == []  # held for the body
        t.write(body)
        assert raw.events == [head + body]  # one write, the same bytes in the same order
        loop.run_until_complete(asyncio.sleep(0))
        assert raw.events == [head + body]  # the flush callback finds nothing held

        lone = b"HTTP/1.1 204 No Content\r\n\r\n"
        t.write(lone)
        loop.run_until_complete(asyncio.sleep(0))  # no body follows: flushed within the loop iteration
        assert raw.events[1:] == [lone]

        t.write(b"plain bytes")  # anything that is not a header block passes straight through
        assert raw.events[2:] == [b"plain bytes"]
        t.write(head)
        t.close()  # close flushes a held header block first
        assert raw.events[3:] == [head, "close"]
        assert t.get_extra_info("socket") == "extra socket"  # the rest is the wrapped transport's
    finally:
        loop.close()


def test_the_cli_uses_the_one_write_protocol_where_httptools_is_installed():
    pytest.importorskip("httptools")
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from lcpo.serve.http import http_protocol

    cls = http_protocol()
    assert isinstance(cls, type) and issubclass(cls, HttpToolsProtocol)


DOCS = [
    b'{"stream": "s", "obs": [0, 1.5, -2e-7], "reward": null, "terminated": false}',
    b'{"a": 1, "a": 2}',                      # a duplicate key: refused (json.loads alone keeps the last)
    b'{"a": {"b": 1, "c": 2, "b": 1}}',       # in a nested object, with the same value
    b'[{"x": 1}, {"x": 2, "y": 3, "x": 4}]',  # in an object inside an array
    b'{"a:b": "c:d", "a:b": ":"}',            # colons inside the repeated strings
    b'{"s": "a:b::c", "t": [":", {"u:": "::"}]}',  # colons in strings, no duplicate
    b'{"a": 1, "\\u0061": 2}',                # the same key spelled with an escape
    b'{"a": 1, "a": "\\u003a"}',              # a duplicate whose dropped colon an escaped colon makes up
    b'{"a\\u003a": 1, "b": "\\u003A"}',        # escaped colons, no duplicate
    b'{"a": NaN, "a": 1}',                    # a duplicate in a document only json.loads parses
    b'[' * 300 + b'{"a": 1, "a": 2}' + b']' * 300,  # deeper than orjson.dumps writes
    b'[' * 300 + b'{"a": 1, "b": 2}' + b']' * 300,
    b'[0, NaN, 2]', b'[Infinity, -Infinity]',  # json's extensions: parsed, then refused by validation (422)
    b'[1e999]', b'[-1e999]',                  # beyond float64: json.loads reads inf
    b'[123456789012345678901]',               # beyond 64 bits
    b'\xef\xbb\xbf{"a": 1}',                  # UTF-8 byte-order mark
    '{"a": [1, 2]}'.encode("utf-16"),         # UTF-16 (json.loads detects it)
    b'{"a": "\\ud800"}',                      # a lone surrogate
    b'[' * 2000 + b']' * 2000,                # deeper than orjson's limit
    b'{not json', b'[1, 2', b'\x80\x81', b'', b'{"a": 1} x', b'[' * 100_000,
]


def _unique(pairs: list) -> dict:
    """The reference: json.loads refusing a repeated key (written here, independent of lcpo.serve.protocol)."""
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate key {next(k for k in keys if keys.count(k) > 1)!r}")
    return dict(pairs)


def _same_value(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("doc", DOCS, ids=range(len(DOCS)))
def test_loads_accepts_and_refuses_exactly_what_json_loads_does(doc):
    """... with repeated keys refused, naming the key: the orjson path decides as json.loads does."""
    pytest.importorskip("orjson")  # without orjson, loads is json.loads with unique_object
    try:
        want = json.loads(doc, object_pairs_hook=_unique)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        if str(exc).startswith("duplicate key"):
            with pytest.raises(DuplicateKeyError) as got:
                loads(doc)
            assert str(got.value) == str(exc)
            return
        with pytest.raises(type(exc)):
            loads(doc)
        return
    got = loads(doc)
    if doc == b'[123456789012345678901]':  # a documented difference: a float of the same value
        assert got == [float(want[0])]
    elif doc in (b'[1e999]', b'[-1e999]'):  # the same infinity json reads, quoted as written in messages
        assert got == want and [repr(x) for x in got] == [doc.decode()[1:-1]]
    else:
        assert _same_value(got, want)


@pytest.mark.parametrize("doc", [b'{"a": 1, "a": 2}', '{"o": {"k": [1], "k": []}}', b'{"a": 1, "\\u0061": 2}'])
def test_loads_refuses_a_repeated_key_without_orjson_too(doc, monkeypatch):
    import lcpo.serve.protocol as protocol

    for parser in (protocol.orjson, None):
        monkeypatch.setattr(protocol, "orjson", parser)
        with pytest.raises(DuplicateKeyError, match="duplicate key '[ak]'") as got:
            loads(doc)
        assert got.value.key in ("a", "k")
    assert loads(b'{"a": 1, "b": {"a": 2}}') == {"a": 1, "b": {"a": 2}}  # the same key in two objects is fine


def test_dumps_round_trips_records_and_answers_exactly():
    rng = np.random.default_rng(0)
    for _ in range(200):
        rec = {"k": "step", "s": "proxy-1", "r": float(rng.normal() * 10.0 ** rng.integers(-30, 30)), "te": False,
               "tr": bool(rng.integers(2)), "f": None, "i": {"gamma": float(rng.random())}, "a": int(rng.integers(9)),
               "v": int(rng.integers(1 << 40)), "#": int(rng.integers(1 << 50))}
        out = dumps(rec)
        assert json.loads(out) == rec and b" " not in out  # exact floats, compact
    with pytest.raises(TypeError):
        dumps({"o": object()})


def _reference_obs(spaces: Spaces, value, field="obs"):
    """The full check, entry by entry, as documented: numbers (not bools), converted to float32 (a float beyond
    float32's range becomes inf), finite, inside the bounds. Returns the array or the refused field."""
    if not isinstance(value, list) or len(value) != spaces.obs_dim:
        return field
    for i, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            return f"{field}[{i}]"
    arr = np.full(spaces.obs_dim, np.inf, dtype=np.float32)
    with np.errstate(over="ignore"):
        for i, x in enumerate(value):
            try:
                arr[i] = x
            except OverflowError:
                pass
    for i in range(spaces.obs_dim):
        if not np.isfinite(arr[i]):
            return f"{field}[{i}]"
    for i in range(spaces.obs_dim):
        if arr[i] < spaces.low[i] or arr[i] > spaces.high[i]:
            return f"{field}[{i}]"
    return arr


def test_fast_observation_check_equals_the_full_check_at_the_edges():
    import gymnasium as gym

    f32max = float(np.finfo(np.float32).max)
    low = np.array([-1.0, -np.inf, 0.0, -np.inf], dtype=np.float32)
    high = np.array([1.0, np.inf, np.float32(0.1), 5.0], dtype=np.float32)
    spaces = Spaces(gym.spaces.Box(low, high, dtype=np.float32), gym.spaces.Discrete(2))
    edges = [0, 1, -1, 0.5, 1.0, -1.0, np.nextafter(1.0, 2.0), np.nextafter(-1.0, -2.0),
             float(np.float32(0.1)), 0.1, np.nextafter(float(np.float32(0.1)), 1.0),  # float64 just above a bound
             f32max, -f32max, np.nextafter(f32max, np.inf), 3.4028235677973366e38, 3.5e38, 1e300, -1e300,
             float("inf"), float("-inf"), float("nan"), 2 ** 24 + 1, 2 ** 60 + 1, 2 ** 70, -(2 ** 70), 10 ** 400,
             True, False, "1", None, 5, 5.0000001, np.nextafter(5.0, 6.0), 5.0001, 1.0001, -1.0001, 0.1001, -1e-7]
    rng = np.random.default_rng(1)
    cases = [[0.0, 0.0, 0.05, 0.0]]
    inside = np.array([[-1.0, -9.0, 0.0, -9.0], [1.0, 9.0, 0.1, 5.0]])
    for _ in range(3000):  # mostly values inside the bounds, some edge values
        cases.append([edges[k] if rng.random() < 0.15 else float(rng.uniform(inside[0, i], inside[1, i]))
                      for i, k in enumerate(rng.integers(len(edges), size=4))])
    cases += [[0.0] * 3, [0.0] * 5, "0,0,0,0"]
    accepted = 0
    for value in cases:
        want = _reference_obs(spaces, value)
        try:
            got = spaces.obs(value, "obs")
        except RequestError as exc:
            assert exc.status == 422 and exc.field == want, (value, exc)
            continue
        assert isinstance(want, np.ndarray), (value, got)
        assert got.dtype == np.float32 and got.tobytes() == want.tobytes(), value
        accepted += 1
    assert 100 < accepted < len(cases) - 100  # both outcomes were exercised


@pytest.mark.parametrize("agent,env_id", [("lcpo", "lcpo/StragglerMitigation-v0"), ("a2c", None)])
def test_published_snapshot_acts_as_the_agents_own_acting_path(agent, env_id):
    """The server answers from ``Learner.snapshot`` with :class:`ActingNoise`; for the same generator state it
    gives the actions ``agent.act`` gives, across noise blocks and after an update (the straggler network's
    NumPy mirror, and a plain MLP's)."""
    from lcpo.envs.registration import make_env
    from lcpo.online.loop import Transition
    from lcpo.serve.learner import ActingNoise, Learner, build_agent
    from lcpo.serve.protocol import ServerState
    from lcpo.serve.spec import spec_env

    env = make_env(env_id) if env_id else spec_env({"observation": {"size": 5}, "action": {"discrete": 4}})
    learner_agent = build_agent(env, agent, 7, {"rollout_steps": 64})
    twin = build_agent(env, agent, 7, {"rollout_steps": 64})  # acts in process, fed the same transitions
    spaces = Spaces(env.observation_space, env.action_space)
    noise = ActingNoise(learner_agent.rngs["act"].bit_generator.state, 256,
                        learner_agent.action_dims * learner_agent.action_bins)
    learner = Learner(learner_agent, ServerState(spaces))
    rng = np.random.default_rng(2)
    low = np.maximum(env.observation_space.low, -3.0)
    high = np.minimum(env.observation_space.high, 3.0)
    obs = rng.uniform(low, high).astype(np.float32)
    versions = set()
    for n in range(600):  # 600 decisions: three noise blocks of 256, and updates at 64, 128, ...
        snap = learner.snapshot
        versions.add(snap.version)
        got = snap.policy.sample(obs, noise.row(n))
        want = twin.act(obs)
        assert int(got[0]) == int(want), (n, snap.version)
        nxt = rng.uniform(low, high).astype(np.float32)
        tr = Transition(obs, spaces.action(int(want)), float(rng.normal()), nxt, False, False, None)
        learner.feed("s", tr)
        twin.observe(tr)
        obs = nxt
    assert len(versions) >= 9  # the comparison ran against many published policies


def _http_exchange(port: int, request: bytes, expect_continue: bytes | None = None) -> bytes:
    """Send ``request`` over a fresh connection and read the whole answer (``Content-Length`` framed); with
    ``expect_continue``, send the head first, wait for ``100 Continue``, then send that body."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        data = b""
        if expect_continue is not None:
            while b"\r\n\r\n" not in data:
                data += s.recv(65536)
            assert data.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), data
            data = data[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
            s.sendall(expect_continue)
        while b"\r\n\r\n" not in data:
            data += s.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0 if request.startswith(b"HEAD ") else int(
            next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
        while len(body) < length:
            body += s.recv(65536)
        return head + b"\r\n\r\n" + body


def test_the_one_write_server_answers_get_head_post_and_expect_continue(tmp_path):
    """A real uvicorn server with the CLI's settings answers every kind of exchange completely, including a HEAD
    answer (a header block with no body write after it) and ``Expect: 100-continue`` (an interim header block
    the client waits for): nothing stays held."""
    pytest.importorskip("httptools")
    import threading
    import time

    import uvicorn

    from lcpo.serve.app import ServeConfig, Server, create_app
    from lcpo.serve.http import http_protocol

    server = Server(ServeConfig(agent="a2c", spec={"observation": {"size": 3}, "action": {"discrete": 2}},
                                overrides={"rollout_steps": 8}, state_dir=str(tmp_path / "state")))
    app = create_app(server)  # with the direct lane, as the CLI runs it
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False,
                            lifespan="on", http=http_protocol(app), proxy_headers=False, server_header=False)
    web = uvicorn.Server(config)
    web.install_signal_handlers = lambda: None  # not the main thread
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not web.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)
        port = web.servers[0].sockets[0].getsockname()[1]
        got = _http_exchange(port, b"GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 200") and json.loads(got.split(b"\r\n\r\n", 1)[1])["decisions"] == 0
        got = _http_exchange(port, b"HEAD /v1/status HTTP/1.1\r\nHost: x\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"\r\n\r\n")
        body = b'{"stream": "s", "obs": [0, 1, 2]}'
        got = _http_exchange(port, b"POST /v1/step HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                   b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        assert got.startswith(b"HTTP/1.1 200") and json.loads(got.split(b"\r\n\r\n", 1)[1])["decision"] == "d0"
        body = b'{"stream": "t", "obs": [0, 1, 2]}'
        got = _http_exchange(port, b"POST /v1/step HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                   b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body), body)
        assert got.startswith(b"HTTP/1.1 200") and json.loads(got.split(b"\r\n\r\n", 1)[1])["decision"] == "d1"
        assert b"server:" not in got.lower()
    finally:
        web.should_exit = True
        thread.join(timeout=60)
        server.close()


def test_a_bad_switch_interval_is_refused_naming_the_value(tmp_path, capsys):
    from lcpo.cli.main import main

    (tmp_path / "spec.json").write_text(json.dumps({"observation": {"size": 2}, "action": {"discrete": 2}}))
    rc = main(["serve", "--spec", str(tmp_path / "spec.json"), "--agent", "a2c", "--state", str(tmp_path / "state"),
               "--switch-interval", "0"])
    assert rc == 2 and "--switch-interval must be in [1e-06, 0.1] seconds, got 0.0" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()


def _uvicorn(app, http):
    """Start uvicorn on a free port in a thread; returns (server, thread, port)."""
    import threading
    import time

    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False,
                            lifespan="on", http=http, proxy_headers=False, server_header=False)
    web = uvicorn.Server(config)
    web.install_signal_handlers = lambda: None  # not the main thread
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not web.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    return web, thread, web.servers[0].sockets[0].getsockname()[1]


def _post(path: bytes, body: bytes, extra: bytes = b"", ctype: bytes = b"application/json") -> bytes:
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n%sContent-Length: %d\r\n\r\n%s"
            % (path, ctype, extra, len(body), body))


def _chunked(path: bytes, body: bytes, extra: bytes = b"") -> bytes:
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[k:k + 50]), body[k:k + 50]) for k in range(0, len(body), 50))
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%sTransfer-Encoding: chunked\r\n\r\n"
            b"%s0\r\n\r\n" % (path, extra, chunks))


def _conversation(port: int, exchanges: list) -> list[bytes]:
    """Send each exchange on one keep-alive connection (a list of requests in one exchange: pipelined, sent in
    one write), reading every answer whole; a connection the server closes is reopened. Date headers removed."""
    import re
    import socket

    answers = []
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    buf = b""
    for requests in exchanges:
        requests = requests if isinstance(requests, list) else [requests]
        sock.sendall(b"".join(requests))
        for _ in requests:
            while b"\r\n\r\n" not in buf:
                data = sock.recv(65536)
                assert data, "the server closed the connection before answering"
                buf += data
            head, _, rest = buf.partition(b"\r\n\r\n")
            length = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))
            while len(rest) < length:
                rest += sock.recv(65536)
            answers.append(re.sub(rb"(?im)^date: [^\r]*\r\n", b"", head) + b"\r\n\r\n" + rest[:length])
            buf = rest[length:]
            if b"connection: close" in head.lower():
                assert sock.recv(65536) == b""  # the server closed it
                sock.close()
                sock, buf = socket.create_connection(("127.0.0.1", port), timeout=10), b""
    sock.close()
    return answers


def test_the_direct_lane_answers_byte_for_byte_as_the_asgi_lane_and_skips_asgi(tmp_path):
    """Two servers from the same state, one with the direct lane (lcpo.serve.http) and one without, get the same
    conversation: good and refused requests of every kind, chunked bodies, a body over the limit, pipelining,
    HTTP/1.0 and Connection: close. Every answer is the same bytes (the date header aside), and the direct
    lane never starts an ASGI cycle for a POST to a decision endpoint."""
    pytest.importorskip("httptools")
    from lcpo.serve.app import ServeConfig, Server, create_app
    from lcpo.serve.http import http_protocol

    spec = {"observation": {"size": 3, "low": -5.0, "high": 5.0}, "action": {"discrete": 3}}
    token = "direct-lane-token-0123456789"
    auth = b"Authorization: Bearer %s\r\n" % token.encode()
    step = b'{"stream": "s", "obs": [0, 1, 2]}'
    exchanges = [
        _post(b"/v1/step", step, auth),
        _post(b"/v1/step", b'{"stream": "s", "obs": [0.5, 1, 2], "reward": 1.5}', auth),
        _post(b"/v1/step", step),                                                   # no token: 401
        _post(b"/v1/step", b'{"stream": "s", "obs": [0, NaN, 2], "reward": 1}', auth),  # 422 naming obs[1]
        _post(b"/v1/step", b"{not json", auth),                                     # 400
        _post(b"/v1/step", b'{"stream": "s", "obs": [0, 1, 2], "reward": 1, "reward": 2}', auth),  # 400: twice
        _post(b"/v1/step", step, auth, ctype=b"text/plain"),                        # 415
        _post(b"/v1/step", b'{"stream": "s", "obs": [' + b"0, " * 150 + b"0]}", auth),  # declared over the limit
        _chunked(b"/v1/step", b'{"stream": "c", "obs": [' + b"0, " * 150 + b"0]}", auth),  # chunked over it
        _chunked(b"/v1/step", b'{"stream": "c", "obs": [1, 1, 1]}', auth),          # chunked, fine
        [_post(b"/v1/act", b'{"stream": "a", "obs": [0, 0, 0]}', auth),             # pipelined: three at once
         _post(b"/v1/observe", b'{"decision": "d3", "reward": 2, "next_obs": [1, 1, 1]}', auth),
         _post(b"/v1/observe", b'{"decision": "d3", "reward": 2, "next_obs": [1, 1, 1]}', auth)],  # duplicate
        _post(b"/v1/batch", b'{"steps": [{"stream": "b", "obs": [0, 0, 0]}, {"stream": "s", "obs": [9, 0, 0]}]}',
              auth),
        b"GET /v1/step HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n",                  # 405: the ASGI lane in both
        _post(b"/v1/step", b'{"stream": "s", "obs": [1, 1, 1], "reward": 0}', auth + b"Connection: close\r\n"),
        _post(b"/v1/step", b'{"stream": "h", "obs": [1, 1, 1]}', auth).replace(b"HTTP/1.1", b"HTTP/1.0", 1),
        b"GET /v1/status HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n",
    ]
    answers, asgi_posts = {}, {}
    for lane in ("direct", "asgi"):
        server = Server(ServeConfig(agent="a2c", spec=spec, overrides={"rollout_steps": 4}, max_body=200,
                                    token=token, state_dir=str(tmp_path / lane), learn="inline"))
        inner = create_app(server)
        seen = asgi_posts[lane] = []

        async def app(scope, receive, send, inner=inner, seen=seen):
            if scope["type"] == "http" and scope["method"] == "POST":
                seen.append(scope["path"])
            await inner(scope, receive, send)

        if lane == "direct":
            app.direct_routes, app.direct_answer = inner.direct_routes, inner.direct_answer
            app.max_body = inner.max_body
        web, thread, port = _uvicorn(app, http_protocol(app))
        try:
            answers[lane] = _conversation(port, exchanges)
        finally:
            web.should_exit = True
            thread.join(timeout=60)
            server.close()
    direct, asgi = answers["direct"], answers["asgi"]
    statuses = [int(a.split(b" ")[1]) for a in direct]
    assert statuses == [200, 200, 401, 422, 400, 400, 415, 413, 413, 200, 200, 200, 409, 200, 405, 200, 200, 200]
    for k, (a, b) in enumerate(zip(direct[:-1], asgi[:-1])):
        assert a == b, f"answer {k}: {a!r} != {b!r}"
    status = [json.loads(a.split(b"\r\n\r\n", 1)[1]) for a in (direct[-1], asgi[-1])]
    assert [{k: v for k, v in st.items() if k != "uptime_s"} for st in status][0] == \
        {k: v for k, v in status[1].items() if k != "uptime_s"}
    assert b"obs[1]" in direct[3] and b"www-authenticate: Bearer" in direct[2]
    assert b"duplicate key 'reward'" in direct[5]
    assert b"connection: close" in direct[15] and b"connection: close" in direct[16]
    assert json.loads(direct[-1].split(b"\r\n\r\n", 1)[1])["accepted"] == 8
    assert asgi_posts["direct"] == [] and len(asgi_posts["asgi"]) == 16
