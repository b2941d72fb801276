"""lcpo serve in process (Starlette's TestClient): protocol round trips, many streams and how their rollout is
assembled, act/observe ordering, every kind of bad request refused with a 4xx naming the field and no state
change, the log's torn-tail rule, and learning through the server equal to learning in process."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

pytest.importorskip("starlette")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from lcpo.serve.app import ConfigMismatch, ServeConfig, Server, create_app
from lcpo.serve.log import LogError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SPEC = {"observation": {"size": 3, "low": -5.0, "high": 5.0}, "action": {"discrete": 3}}


def _serve(tmp_path, **kw):
    kw.setdefault("spec", SPEC)
    kw.setdefault("overrides", {"rollout_steps": 6})
    cfg = ServeConfig(agent=kw.pop("agent", "a2c"), state_dir=str(tmp_path / "state"), **kw)
    server = Server(cfg)
    return server, TestClient(create_app(server))


def _obs(rng):
    return rng.uniform(-1, 1, size=3).round(3).tolist()


def test_step_round_trip_status_metrics_openapi(tmp_path):
    server, client = _serve(tmp_path, learn="inline")
    rng = np.random.default_rng(0)
    with client:
        first = client.post("/v1/step", json={"stream": "p1", "obs": _obs(rng)}).json()
        assert first["decision"] == "d0" and first["policy_version"] == 0 and first["action"] in (0, 1, 2)
        versions = []
        for t in range(7):
            r = client.post("/v1/step", json={"stream": "p1", "obs": _obs(rng), "reward": float(t)})
            assert r.status_code == 200, r.text
            assert r.json()["decision"] == f"d{t + 1}"
            versions.append(r.json()["policy_version"])
        # the 6th transition completes the rollout: inline learning answers it from the updated policy
        assert versions == [0, 0, 0, 0, 0, 1, 1]
        st = client.get("/v1/status").json()
        assert (st["steps"], st["decisions"], st["updates"], st["policy_version"], st["streams"]) == (7, 8, 1, 1, 1)
        assert st["outstanding"] == 1 and st["learner_waiting"] == 1 and "train/policy_loss" in st["diagnostics"]
        metrics = client.get("/metrics").text
        assert "lcpo_serve_steps_total 7\n" in metrics and "lcpo_serve_updates_total 1\n" in metrics
        schema = client.get("/openapi.json").json()
        assert schema["openapi"].startswith("3.") and {"/v1/step", "/v1/act", "/v1/observe"} <= set(schema["paths"])
    log = [json.loads(line.split("\t")[0]) for p in sorted((tmp_path / "state/log").glob("*.jsonl"))
           for line in p.read_text().splitlines()]
    assert [r["#"] for r in log] == list(range(8)) and [r["r"] for r in log] == [None] + [float(t) for t in range(7)]


def test_act_observe_order_duplicates_and_unknown_decisions(tmp_path):
    server, client = _serve(tmp_path)
    with client:
        d0 = client.post("/v1/act", json={"stream": "s", "obs": [0, 0, 0]}).json()["decision"]
        d1 = client.post("/v1/act", json={"stream": "s", "obs": [1, 1, 1]}).json()["decision"]
        body = {"reward": 1.0, "next_obs": [1, 1, 1]}
        r = client.post("/v1/observe", json={"decision": d1, **body})
        assert r.status_code == 409 and r.json()["field"] == "decision" and d0 in r.json()["error"]
        assert client.post("/v1/observe", json={"decision": d0, **body}).json()["steps"] == 1
        r = client.post("/v1/observe", json={"decision": d0, **body})
        assert r.status_code == 409 and "duplicate observe" in r.json()["error"]
        r = client.post("/v1/observe", json={"decision": "d99", **body})
        assert r.status_code == 404 and r.json()["field"] == "decision"
        d2 = client.post("/v1/act", json={"stream": "t", "obs": [0, 0, 0]}).json()["decision"]
        r = client.post("/v1/observe", json={"decision": d2, **body, "reward": 4e38})  # beyond float32
        assert r.status_code == 422 and r.json()["field"] == "reward"
        assert client.post("/v1/observe", json={"decision": d2, **body}).status_code == 200
        # a step needs exactly one outstanding decision; reward null starts the stream afresh, dropping it
        client.post("/v1/act", json={"stream": "s", "obs": [0, 0, 0]})
        r = client.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0], "reward": 0.0})
        assert r.status_code == 409 and r.json()["field"] == "reward"
        assert client.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0]}).status_code == 200
        assert server.state.outstanding == 1
        r = client.post("/v1/observe", json={"decision": d1, **body})
        assert r.status_code == 409  # dropped with the fresh start


def test_many_streams_rollout_is_assembled_per_stream(tmp_path):
    """Interleaved streams A, B, C: the update sees each stream's run contiguously (streams ordered by their run's
    first transition), every run but the last cut (truncated) at its end, an episode end kept as it is."""
    server, client = _serve(tmp_path, learn="inline", overrides={"rollout_steps": 7})
    fed = []
    real = server.learner.agent.observe
    server.learner.agent.observe = lambda tr: (fed.append(tr), real(tr))[1]
    with client:
        for s in "ABC":
            client.post("/v1/step", json={"stream": s, "obs": [0, 0, 0]})
        arrivals = ["B", "A", "C", "A", "B", "A"]
        rewards = {}
        for k, s in enumerate(arrivals):
            body = {"stream": s, "obs": [k / 10, 0, 0], "reward": float(k)}
            if k == 4:  # B's episode ends here
                body.update(terminated=True, final_obs=[4.5, 0, 0])
            assert client.post("/v1/step", json=body).status_code == 200
            rewards.setdefault(s, []).append(float(k))
        assert fed == []  # 6 transitions wait; the 7th completes the rollout
        client.post("/v1/step", json={"stream": "C", "obs": [0.9, 0, 0], "reward": 6.0})
        rewards["C"].append(6.0)
    order = [(tr.reward, tr.terminated, tr.truncated) for tr in fed]
    assert order == [(0.0, False, False), (4.0, True, False),                     # B's run: ended by its episode
                     (1.0, False, False), (3.0, False, False), (5.0, False, True),  # A's run, cut at its end
                     (2.0, False, False), (6.0, False, False)]                    # C's run: the last, not cut
    assert np.array_equal(fed[1].next_obs, np.float32([4.5, 0, 0]))  # final_obs, not the reset observation
    assert np.array_equal(fed[2].obs, np.float32([0, 0, 0])) and np.array_equal(fed[3].obs, np.float32([0.1, 0, 0]))
    assert server.learner.updates == 1


GOOD = {"stream": "s", "obs": [0.0, 0.0, 0.0], "reward": 1.0}


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One server for the bad-request cases: stream ``s`` with d0 observed and one decision open."""
    folder = tmp_path_factory.mktemp("bad")
    server, client = _serve(folder, learn="inline", max_body=65536)
    with client:
        client.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0]})   # d0 on s
        client.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0], "reward": 0.5})  # d0 observed, d1 open
        yield server, client, folder / "state"


@pytest.mark.parametrize("path,body,status,field", [
    ("/v1/step", b"{not json", 400, "body"),
    ("/v1/step", b"[1, 2]", 400, "body"),
    ("/v1/step", b"null", 400, "body"),
    ("/v1/step", {**GOOD, "obs": [0.0, 0.0]}, 422, "obs"),
    ("/v1/step", {**GOOD, "obs": "0,0,0"}, 422, "obs"),
    ("/v1/step", b'{"stream": "s", "obs": [0, NaN, 0], "reward": 1}', 422, "obs[1]"),
    ("/v1/step", b'{"stream": "s", "obs": [0, 0, 1e999], "reward": 1}', 422, "obs[2]"),
    ("/v1/step", {**GOOD, "obs": [0.0, 9.0, 0.0]}, 422, "obs[1]"),
    ("/v1/step", {**GOOD, "obs": [0.0, True, 0.0]}, 422, "obs[1]"),
    ("/v1/step", b'{"stream": "s", "obs": [0, 0, 0], "reward": NaN}', 422, "reward"),
    ("/v1/step", {**GOOD, "reward": "1"}, 422, "reward"),
    ("/v1/step", {**GOOD, "reward": 1e39}, 422, "reward"),  # finite, but the learner would fail on it for good
    ("/v1/step", {**GOOD, "reward": -1e308}, 422, "reward"),
    ("/v1/step", {**GOOD, "terminated": 1}, 422, "terminated"),
    ("/v1/step", {**GOOD, "terminated": True}, 422, "final_obs"),
    ("/v1/step", {**GOOD, "final_obs": [0.0, 0.0, 0.0]}, 422, "final_obs"),
    ("/v1/step", {**GOOD, "info": {"gamma": 2.0}}, 422, "info.gamma"),
    ("/v1/step", {**GOOD, "info": {"code": "import os"}}, 422, "info.code"),
    ("/v1/step", {**GOOD, "extra": 1}, 422, "extra"),
    ("/v1/step", {**GOOD, "stream": "bad name!"}, 422, "stream"),
    ("/v1/step", {"obs": [0.0, 0.0, 0.0]}, 422, "stream"),
    ("/v1/step", {**GOOD, "stream": "never-seen"}, 404, "stream"),
    ("/v1/step", {"stream": "t", "obs": [0.0, 0.0, 0.0], "terminated": True}, 422, "terminated"),
    ("/v1/step", {"stream": "t", "obs": [0.0, 0.0, 0.0], "final_obs": 0}, 422, "final_obs"),
    ("/v1/step", {"stream": "t", "obs": [0.0, 0.0, 0.0], "final_obs": False}, 422, "final_obs"),
    ("/v1/step", {"stream": "t", "obs": [0.0, 0.0, 0.0], "info": False}, 422, "info"),
    ("/v1/act", {"stream": "s", "obs": [0.0, 0.0, 0.0], "reward": 1.0}, 422, "reward"),
    ("/v1/observe", {"decision": "d0", "reward": 1.0, "next_obs": [0.0, 0.0, 0.0]}, 409, "decision"),
    ("/v1/observe", {"decision": "d999999", "reward": 1.0, "next_obs": [0.0, 0.0, 0.0]}, 404, "decision"),
    ("/v1/observe", {"decision": "x1", "reward": 1.0, "next_obs": [0.0, 0.0, 0.0]}, 422, "decision"),
    ("/v1/observe", {"decision": "d1", "reward": 1.0}, 422, "next_obs"),
    ("/v1/step", b"\x80\x81", 400, "body"),
    ("/v1/step", b'{"stream": "s", "obs": [0, 0, 0], "reward": 1e39, "reward": 1}', 400, "body"),  # a key twice
    ("/v1/step", b'{"stream": "s", "obs": [0, 0, 0], "reward": 1, "info": {"gamma": 2, "gamma": 1}}', 400, "body"),
    ("/v1/batch", b'{"steps": [{"stream": "s", "obs": [0, 0, 0], "stream": "t"}]}', 400, "body"),
    ("/v1/step", b"[" * 100_000, 413, "body"),
    ("/v1/step", "form", 415, "content-type"),
])
def test_bad_request_is_refused_naming_the_field_and_changes_nothing(shared, path, body, status, field):
    server, client, folder = shared
    before = client.get("/v1/status").json()
    log_before = b"".join(p.read_bytes() for p in sorted((folder / "log").glob("*.jsonl")))
    learner_before = server.learner.state_dict()["replica"]
    if body == "form":
        r = client.post(path, content=b"stream=s", headers={"content-type": "application/x-www-form-urlencoded"})
    elif isinstance(body, bytes):
        r = client.post(path, content=body, headers={"content-type": "application/json"})
    else:
        r = client.post(path, json=body)
    assert r.status_code == status, r.text
    assert r.json()["field"] == field and r.json()["error"]
    assert server.counts["refused"] == before["refused"] + 1
    after = client.get("/v1/status").json()
    for k in ("steps", "decisions", "records", "outstanding", "streams", "updates", "learner_position"):
        assert after[k] == before[k], k
    assert after["refused"] == before["refused"] + 1
    assert b"".join(p.read_bytes() for p in sorted((folder / "log").glob("*.jsonl"))) == log_before
    assert server.learner.state_dict()["replica"] == learner_before
    assert client.post("/v1/step", json=GOOD).status_code == 200  # and the stream goes on


def test_a_repeated_key_is_refused_naming_it_wherever_it_is(tmp_path):
    """json keeps the last of two equal keys; the server refuses the body (400, the key named, nothing logged),
    and refuses a hand-edited serve.json or spec file that repeats a key (one line naming the file and key)."""
    server, client = _serve(tmp_path)
    with client:
        for body, key in [(b'{"stream": "s", "obs": [0, 0, 0], "stream": "t"}', "stream"),
                          (b'{"steps": [{"stream": "s", "obs": [0, 0, 0]}, {"stream": "t", "obs": [0, 0, 0], '
                           b'"obs": [1, 1, 1]}]}', "obs")]:
            path = "/v1/batch" if body.startswith(b'{"steps"') else "/v1/step"
            r = client.post(path, content=body, headers={"content-type": "application/json"})
            assert r.status_code == 400 and r.json()["field"] == "body", r.text
            assert f"duplicate key {key!r}" in r.json()["error"] and "\n" not in r.json()["error"]
        st = client.get("/v1/status").json()
        assert (st["records"], st["refused"]) == (0, 2)  # the batch's good first step was not applied either
    meta = tmp_path / "state/serve.json"
    meta.write_text(meta.read_text().rstrip()[:-1] + ', "seed": 0}\n')
    with pytest.raises(ValueError, match=r"serve.json is not a valid configuration \(duplicate key 'seed'\)"):
        _serve(tmp_path)


def test_limits_on_streams_and_outstanding_decisions(tmp_path):
    server, client = _serve(tmp_path, max_streams=2, max_outstanding=2)
    with client:
        for s in ("a", "b"):
            assert client.post("/v1/act", json={"stream": s, "obs": [0, 0, 0]}).status_code == 200
        r = client.post("/v1/act", json={"stream": "c", "obs": [0, 0, 0]})
        assert r.status_code == 429 and r.json()["field"] == "stream"
        client.post("/v1/act", json={"stream": "a", "obs": [0, 0, 0]})
        assert client.post("/v1/act", json={"stream": "a", "obs": [0, 0, 0]}).status_code == 429
        assert client.post("/v1/step", json={"stream": "a", "obs": [0, 0, 0]}).status_code == 200  # drops both


def test_restart_replays_the_log_and_cuts_a_torn_last_line(tmp_path):
    server, client = _serve(tmp_path, checkpoint_every=0)
    with client:
        client.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0]})
        for k in range(8):
            client.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0], "reward": float(k)})
        assert server.learner.wait_for(9, timeout=60)  # the background learner consumed all 9 records
        want = server.learner.state_dict()
    seg = sorted((tmp_path / "state/log").glob("*.jsonl"))[0]
    (tmp_path / "state/checkpoint").rename(tmp_path / "old-checkpoint")  # as if killed before any checkpoint
    good = seg.read_bytes()
    seg.write_bytes(good + b'{"k":"step","s":"s","o":[0,0')  # a write cut by kill -9: never acknowledged
    server, client = _serve(tmp_path, checkpoint_every=0)
    with client:
        assert server.replayed == 9 and seg.read_bytes() == good
        st = client.get("/v1/status").json()
        assert (st["steps"], st["decisions"]) == (8, 9)
        assert client.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0], "reward": 9.0}).json()["decision"] == "d9"
        server.learner.wait_for(10)
        got = server.learner.state_dict()
    assert got["agent"]["updates"] == want["agent"]["updates"] == 1
    for k in ("actor", "critic"):
        for name, t in want["agent"][k].items():
            assert t.equal(got["agent"][k][name]), name
    lines = seg.read_bytes().split(b"\n")
    seg.write_bytes(b"\n".join(lines[:3] + [lines[3][:-4] + b"0000"] + lines[4:]))  # bad CRC inside the log
    with pytest.raises(LogError, match=r"line 4 is corrupt"):
        Server(ServeConfig(agent="a2c", spec=SPEC, overrides={"rollout_steps": 6}, state_dir=str(tmp_path / "state")))


def test_state_folder_keeps_its_configuration(tmp_path):
    server, client = _serve(tmp_path)
    with client:
        pass
    with pytest.raises(ConfigMismatch, match="seed"):
        Server(ServeConfig(agent="a2c", spec=SPEC, seed=1, overrides={"rollout_steps": 6},
                           state_dir=str(tmp_path / "state")))


@pytest.mark.parametrize("agent", ["ddqn", "sac", "prescient-a2c", "mbcd"])
def test_agents_acting_through_their_own_state_are_refused_with_a_reason(tmp_path, agent):
    with pytest.raises(ValueError, match="on-policy agent that acts from its policy alone"):
        Server(ServeConfig(agent=agent, spec=SPEC, state_dir=str(tmp_path / "state")))
    with pytest.raises(ValueError, match="unknown agent 'nope'"):
        Server(ServeConfig(agent="nope", spec=SPEC, state_dir=str(tmp_path / "state")))


def test_every_listed_agent_can_be_served(tmp_path):
    from lcpo.envs.registration import make_env
    from lcpo.serve.learner import SUPPORTED

    spec = {**SPEC, "context": {"indices": [1, 2], "names": ["load", "size"]}}  # LCPO's OOD detector reads it
    for name in SUPPORTED:
        where = {"env": "lcpo/TrapGrid-v0"} if name == "tabular-a2c" else {"spec": spec}  # a table needs states
        server = Server(ServeConfig(agent=name, state_dir=str(tmp_path / name), overrides={"rollout_steps": 4},
                                    learn="inline", **where))
        obs = (make_env("lcpo/TrapGrid-v0").reset(seed=0)[0].tolist() if name == "tabular-a2c"
               else [0.0, 0.0, 0.0])
        server.step({"stream": "s", "obs": obs})
        for _ in range(4):
            out = server.step({"stream": "s", "obs": obs, "reward": 1.0})
        assert out["policy_version"] == 1, name
        server.close()


@pytest.mark.parametrize("agent", ["a2c", "lcpo"])
def test_straggler_through_the_server_equals_in_process_learning(tmp_path, agent):
    """The straggler environment stepped by a client through /v1/step (inline learning) gives the same actions
    and the same networks as ``agent.learn`` on the same seed."""
    from lcpo.agents import AGENTS
    from lcpo.envs.registration import make_env
    from lcpo.envs.straggler.presets import straggler_overrides

    steps, seed = 100, 3
    overrides = straggler_overrides(agent, rollout_steps=32)
    env_kwargs = {"workload": "constant-60x28"}
    ref = AGENTS[agent](make_env("lcpo/StragglerMitigation-v0", **env_kwargs), seed=seed, **overrides)
    ref_actions = []
    real_act = ref.act
    ref.act = lambda obs: (lambda a: (ref_actions.append(int(a)), a)[1])(real_act(obs))
    ref.learn(steps)

    server, client = _serve(tmp_path, agent=agent, spec=None, env="lcpo/StragglerMitigation-v0",
                            env_kwargs=env_kwargs, seed=seed, overrides=overrides, learn="inline")
    env = make_env("lcpo/StragglerMitigation-v0", **env_kwargs)
    obs, _ = env.reset(seed=seed)
    actions = []
    with client:
        body = {"stream": "lb", "obs": obs.tolist()}
        for _ in range(steps):
            a = client.post("/v1/step", json=body).json()["action"]
            actions.append(a)
            obs, reward, terminated, truncated, info = env.step(a)
            body = {"stream": "lb", "obs": obs.tolist(), "reward": float(reward), "terminated": bool(terminated),
                    "truncated": bool(truncated), "info": {"gamma": float(info["gamma"])}}
        client.post("/v1/step", json=body)  # the last transition
        got = server.learner.agent
        assert got.updates == ref.updates == steps // 32
    assert actions == ref_actions
    for k in ("actor", "critic"):
        ref_sd, got_sd = getattr(ref, k).state_dict(), getattr(got, k).state_dict()
        for name in ref_sd:
            assert ref_sd[name].equal(got_sd[name]), f"{k}.{name}"


def test_batch_applies_steps_in_order_and_refuses_each_bad_one_alone(tmp_path):
    server, client = _serve(tmp_path)
    with client:
        steps = [{"stream": "a", "obs": [0, 0, 0]}, {"stream": "b", "obs": [0, 0, 0]},
                 {"stream": "a", "obs": [1, 0, 0], "reward": 1.0},
                 {"stream": "b", "obs": [0, float("inf"), 0], "reward": 1.0},  # refused alone
                 {"stream": "b", "obs": [0, 1, 0], "reward": 2.0}]
        body = json.dumps({"steps": steps}).replace("Infinity", "1e999")
        r = client.post("/v1/batch", content=body, headers={"content-type": "application/json"})
        res = r.json()["results"]
        assert [x.get("decision") for x in res] == ["d0", "d1", "d2", None, "d3"]
        assert res[3]["status"] == 422 and res[3]["field"] == "steps[3].obs[1]"
        st = client.get("/v1/status").json()
        assert (st["steps"], st["decisions"], st["refused"]) == (2, 4, 1)
        assert client.post("/v1/batch", json={"steps": []}).status_code == 422
        assert client.get("/v1/step").status_code == 405
        res = client.post("/v1/batch", json={"steps": [[1], None, {"stream": "c", "obs": [0, 0, 0]}]}).json()["results"]
        assert [(x.get("status"), x.get("field")) for x in res[:2]] == [(422, "steps[0]"), (422, "steps[1]")]
        assert res[2]["decision"] == "d4"


def test_a_batch_names_an_entry_that_is_no_object_and_the_keys_it_does_not_take(tmp_path):
    """Before: an entry that is not an object read "the request body must be a JSON object" (400), and a body
    with a key besides steps was refused naming the field "steps"."""
    server, client = _serve(tmp_path)
    with client:
        res = client.post("/v1/batch", json={"steps": [{"stream": "a", "obs": [0, 0, 0]}, 1, "x", [1], None]}).json()
        res = res["results"]
        assert res[0]["decision"] == "d0"
        assert res[3] == {"error": "steps[3] must be a JSON object (a step body), got array", "field": "steps[3]",
                          "status": 422}
        assert [(r["field"], r["error"].rsplit(", got ", 1)[1]) for r in res[1:]] == [
            ("steps[1]", "number"), ("steps[2]", "string"), ("steps[3]", "array"), ("steps[4]", "null")]
        records = server.state.records
        for body, status, want in (
                ({"steps": [], "foo": 1}, 422, {"error": "unknown field 'foo'; allowed: steps", "field": "foo"}),
                ({"steps": [{"stream": "b", "obs": [0, 0, 0]}], "foo": 1, "bar": 2}, 422,
                 {"error": "unknown fields 'bar', 'foo'; allowed: steps", "field": "bar"}),
                ({}, 422, {"error": "missing field 'steps'", "field": "steps"}),
                ([{"stream": "b", "obs": [0, 0, 0]}], 400,
                 {"error": "the request body must be a JSON object, got array", "field": "body"})):
            r = client.post("/v1/batch", json=body)
            assert (r.status_code, r.json()) == (status, want), body
        assert server.state.records == records  # nothing of a refused batch applied
        # a literal beyond float64 is a number too (was "object"), and types are JSON's names (were NoneType, bool)
        for raw, status, want in (
                (b"1e400", 400, {"error": "the request body must be a JSON object, got number", "field": "body"}),
                (b'{"steps": [1e400]}', 200, {"results": [{"error": "steps[0] must be a JSON object (a step body), "
                                                                    "got number", "field": "steps[0]", "status": 422}]}),
                (b'{"steps": [{"stream": "b", "obs": null}]}', 200, {"results": [{
                    "error": "obs must be a list of 3 numbers, got null", "field": "steps[0].obs", "status": 422}]}),
                (b'{"steps": [{"stream": "b", "obs": 1e400}]}', 200, {"results": [{
                    "error": "obs must be a list of 3 numbers, got number", "field": "steps[0].obs", "status": 422}]}),
                (b'{"steps": [{"stream": "b", "obs": true}]}', 200, {"results": [{
                    "error": "obs must be a list of 3 numbers, got boolean", "field": "steps[0].obs", "status": 422}]})):
            r = client.post("/v1/batch", content=raw, headers={"content-type": "application/json"})
            assert (r.status_code, r.json()) == (status, want), raw


@pytest.mark.parametrize("path, raw, field, message", [
    # a finite number outside the bounds [-5, 5]: was "obs[2] must be finite, got 1e+39"
    ("/v1/step", b'{"stream": "s", "obs": [0, 0, 1e39], "reward": 1}', "obs[2]",
     "obs[2] = 1e+39 is outside the observation space's bounds [-5.0, 5.0]"),
    ("/v1/step", b'{"stream": "s", "obs": [0, -7.5, 0], "reward": 1}', "obs[1]",
     "obs[1] = -7.5 is outside the observation space's bounds [-5.0, 5.0]"),
    # integers beyond float64 (JSON numbers may have any number of digits): was "reward must be finite, got inf"
    ("/v1/step", b'{"stream": "s", "obs": [0, 0, 0], "reward": 1' + b"0" * 400 + b"}", "reward",
     "reward = 1e+400 is beyond float64's range (±1.797e308)"),
    ("/v1/step", b'{"stream": "s", "obs": [0, 0, 0], "reward": -2' + b"0" * 400 + b"}", "reward",
     "reward = -2e+400 is beyond float64's range (±1.797e308)"),
    ("/v1/step", b'{"stream": "s", "obs": [0, 0, 1' + b"0" * 400 + b'], "reward": 1}', "obs[2]",
     "obs[2] = 1e+400 is beyond float64's range (±1.797e308)"),
    ("/v1/step", b'{"stream": "s", "obs": [0, 0, 0], "reward": 1, "info": {"gamma": 1' + b"0" * 400 + b"}}",
     "info.gamma", "info.gamma = 1e+400 is beyond float64's range (±1.797e308)"),  # was a 500 (OverflowError)
    # float literals beyond float64: json reads them as infinities; was "reward must be finite, got inf"
    ("/v1/step", b'{"stream": "s", "obs": [0, 0, 0], "reward": 1e400}', "reward",
     "reward = 1e400 is beyond float64's range (±1.797e308)"),
    ("/v1/step", b'{"stream": "s", "obs": [0, -2.5E999, 0], "reward": 1}', "obs[1]",
     "obs[1] = -2.5E999 is beyond float64's range (±1.797e308)"),
    ("/v1/step", b'{"stream": "s", "obs": [0, 0, 0], "reward": 1, "info": {"gamma": 1e400}}', "info.gamma",
     "info.gamma = 1e400 is beyond float64's range (±1.797e308)"),
    ("/v1/step", b'{"stream": "s", "obs": [0, 0, 0], "reward": 1, "info": {"gamma": NaN}}', "info.gamma",
     "info.gamma must be finite, got nan"),
    ("/v1/step", b'{"stream": "s", "obs": [0, 0, 0], "reward": NaN}', "reward", "reward must be finite, got nan"),
    ("/v1/batch", b'{"steps": [{"stream": "s", "obs": [0, 0, 0], "reward": 1' + b"0" * 400 + b"}]}",
     "steps[0].reward", "reward = 1e+400 is beyond float64's range (±1.797e308)"),
    ("/v1/batch", b'{"steps": [{"stream": "s", "obs": [0, 0, 1e400], "reward": 1}]}',
     "steps[0].obs[2]", "obs[2] = 1e400 is beyond float64's range (±1.797e308)"),
])
def test_every_number_is_refused_for_its_own_reason_in_one_line(shared, path, raw, field, message):
    server, client, folder = shared
    records = server.state.records
    r = client.post(path, content=raw, headers={"content-type": "application/json"})
    if path == "/v1/batch":
        assert r.status_code == 200 and r.json()["results"] == [{"error": message, "field": field, "status": 422}]
    else:
        assert r.status_code == 422 and r.json() == {"error": message, "field": field}
    assert server.state.records == records


def test_a_finite_observation_beyond_float32_in_an_unbounded_entry_is_named_as_such():
    import gymnasium as gym

    from lcpo.serve.protocol import RequestError, Spaces

    spaces = Spaces(gym.spaces.Box(np.float32([-1, -np.inf]), np.float32([1, np.inf])), gym.spaces.Discrete(2))
    for value, message in (([0, 1e39], "obs[1] = 1e+39 is beyond float32's range (±3.4e38), in which "
                                       "observations are stored"),  # was "obs[1] must be finite, got 1e+39"
                           ([0, -(10 ** 39)], "obs[1] = -1e+39 is beyond float32's range (±3.4e38), in which "
                                              "observations are stored"),
                           ([2, 1e38], "obs[0] = 2 is outside the observation space's bounds [-1.0, 1.0]"),
                           ([1e39, 0], "obs[0] = 1e+39 is outside the observation space's bounds [-1.0, 1.0]")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no overflow warning on the way
            with pytest.raises(RequestError) as e:
                spaces.obs(value, "obs")
        assert (e.value.status, str(e.value)) == (422, message), value
    assert spaces.obs([1, 3.4028235e38], "obs")[1] == np.finfo(np.float32).max  # float32's maximum as printed


def test_acting_noise_is_the_agents_own_stream_and_survives_a_seek():
    from lcpo.agents import AGENTS
    from lcpo.serve.learner import ActingNoise
    from lcpo.serve.spec import spec_env

    agent = AGENTS["a2c"](spec_env(SPEC), seed=4, rollout_steps=6)
    noise = ActingNoise(agent.rngs["act"].bit_generator.state, 256, 3)
    blocks = []
    for _ in range(3):
        agent._refill_noise(0)  # what the agent's act draws, block after block (seed 0 of its seed axis)
        blocks.append(agent._noise[0].copy())
    rows = np.stack([noise.row(n) for n in range(3 * 256)])
    assert np.array_equal(rows, np.concatenate(blocks))
    saved = noise.state_at(300)  # block 1, kept while the noise is at block 2
    assert saved["block"] == 1
    again = ActingNoise(AGENTS["a2c"](spec_env(SPEC), seed=4).rngs["act"].bit_generator.state, 256, 3)
    again.seek(json.loads(json.dumps(saved)))  # as a checkpoint stores it
    assert np.array_equal(again.row(300), blocks[1][300 - 256]) and np.array_equal(again.row(700), blocks[2][700 - 512])
    with pytest.raises(ValueError, match="already passed"):
        again.row(10)
    ahead = again.state_at(5 * 256 + 3)  # a block not drawn yet: computed on a copy, the acting path unmoved
    assert np.array_equal(again.row(701), blocks[2][701 - 512])
    later = ActingNoise(agent.rngs["act"].bit_generator.state, 256, 3)
    later.seek(ahead)
    for _ in range(3):
        agent._refill_noise(0)  # blocks 3, 4, 5
    assert np.array_equal(later.row(5 * 256 + 3), agent._noise[0, 3])


def test_multi_discrete_actions_are_lists_and_learned_as_vectors(tmp_path):
    spec = {"observation": {"size": 2}, "action": {"multi_discrete": [4, 4, 4]}}
    server, client = _serve(tmp_path, spec=spec, learn="inline", overrides={"rollout_steps": 3})
    with client:
        a = client.post("/v1/step", json={"stream": "m", "obs": [0.5, 1.5]}).json()["action"]
        assert isinstance(a, list) and len(a) == 3 and all(0 <= x < 4 for x in a)
        for k in range(3):
            r = client.post("/v1/step", json={"stream": "m", "obs": [0.5, k], "reward": 1.0}).json()
        assert r["policy_version"] == 1


def test_the_bearer_token_is_required_everywhere_and_its_scheme_is_case_insensitive(tmp_path):
    token = "a-token-of-thirty-two-characters"
    server, client = _serve(tmp_path, learn="inline", token=token)
    with client:
        step = {"stream": "s", "obs": [0.0, 0.0, 0.0]}
        for path in ("/v1/status", "/metrics", "/openapi.json"):
            assert client.get(path).status_code == 401, path
            assert client.get(path, headers={"Authorization": f"Bearer {token}"}).status_code == 200, path
        for auth in (None, "Bearer wrong-token-of-thirty-two-chars", f"Basic {token}", f"Bearer  {token}", token):
            r = client.post("/v1/step", json=step, headers={} if auth is None else {"Authorization": auth})
            assert r.status_code == 401 and r.json()["field"] == "authorization", auth
        assert server.state.records == 0
        for scheme in ("Bearer", "bearer", "BEARER"):  # RFC 9110: the auth scheme is case-insensitive
            r = client.post("/v1/step", json=step, headers={"Authorization": f"{scheme} {token}"})
            assert r.status_code == 200, scheme
        assert server.state.records == 3


def test_an_unknown_path_or_method_is_refused_in_the_protocol_s_json(tmp_path):
    server, client = _serve(tmp_path, learn="inline")
    with client:
        for method, path, status in (("GET", "/v1/nope", 404), ("POST", "/v1/steps", 404), ("GET", "/", 404),
                                     ("POST", "/v1/status", 405), ("DELETE", "/metrics", 405),
                                     ("GET", "/v1/step", 405)):
            r = client.request(method, path)
            assert r.status_code == status, (method, path)
            assert r.headers["content-type"] == "application/json", (method, path)
            assert path in r.json()["error"] or method in r.json()["error"], r.json()
            if status == 404:  # the message lists every endpoint, not only the schema's
                assert all(p in r.json()["error"] for p in ("/v1/step", "/v1/batch", "/v1/status", "/openapi.json"))
        assert "GET" in client.request("POST", "/v1/status").headers["allow"]


def test_the_python_client_sends_batches_and_names_refusals(tmp_path):
    from lcpo.serve.client import ServeClient, ServeError

    server, client = _serve(tmp_path, learn="inline", token="a-token-of-thirty-two-characters")
    with client:
        c = ServeClient("http://testserver", token="a-token-of-thirty-two-characters")
        c._http = client  # Starlette's TestClient is an httpx.Client
        client.headers["Authorization"] = "Bearer a-token-of-thirty-two-characters"
        out = c.batch([{"stream": "a", "obs": [0, 0, 0]}, {"stream": "b", "obs": [0, 0, 0]},
                       {"stream": "a", "obs": [0, 0, 9], "reward": 1.0},  # refused alone
                       {"stream": "a", "obs": [0, 0, 1], "reward": 1.0, "info": {"gamma": 0.5}}])
        assert [r.get("decision") for r in out] == ["d0", "d1", None, "d2"]
        assert out[2]["status"] == 422 and out[2]["field"] == "steps[2].obs[2]"
        assert c.status()["steps"] == 1
        del client.headers["Authorization"]
        with pytest.raises(ServeError) as refused:
            c.status()
        assert refused.value.status == 401 and refused.value.field == "authorization"


def test_the_docs_python_client_example_runs_through_episode_ends(tmp_path, monkeypatch):
    import re
    from pathlib import Path

    import lcpo.serve.client as client_module

    doc = (Path(__file__).resolve().parents[2] / "docs/serving.md").read_text()
    code = re.search(r"### Python client\n\n```python\n(.*?)```", doc, re.S).group(1)
    assert code.count("while True:") == 1
    code = code.replace("while True:", "for _ in range(25):")  # the example serves forever

    server, test_client = _serve(tmp_path, learn="inline")

    class Client(client_module.ServeClient):
        def __init__(self, url, token=None):
            super().__init__(url, token)
            self._http = test_client

    class System:  # a Gymnasium-like system whose episodes end every 4 steps
        t = 0

        def apply(self, action):
            self.t += 1
            return [0.1 * (self.t % 4), 0.0, 0.0], -1.0, False, self.t % 4 == 0, {"gamma": 0.9}

        def reset(self):
            return [0.0, 0.0, 1.0]

    monkeypatch.setattr(client_module, "ServeClient", Client)
    with test_client:
        exec(code, {"obs": [0.0, 0.0, 0.0], "system": System(), "next_obs": [0.0, 0.0, 0.0]})
        assert server.state.transitions == 26 and server.state.records == 30  # 1 + 25 steps, act, observe, 2


def test_a_stream_whose_decisions_are_all_observed_is_forgotten_and_frees_its_place(tmp_path):
    server, client = _serve(tmp_path, max_streams=2, learn="inline")
    body = {"reward": 1.0, "next_obs": [0, 0, 0]}
    with client:
        for s in ("a", "b"):
            d = client.post("/v1/act", json={"stream": s, "obs": [0, 0, 0]}).json()["decision"]
            assert client.post("/v1/observe", json={"decision": d, **body}).status_code == 200
        assert client.get("/v1/status").json()["streams"] == 0
        # a /v1/step stream ends when its last decision is observed
        client.post("/v1/step", json={"stream": "c", "obs": [0, 0, 0]})
        d = client.post("/v1/step", json={"stream": "c", "obs": [0, 0, 1], "reward": 0.5}).json()["decision"]
        assert client.post("/v1/act", json={"stream": "d", "obs": [0, 0, 0]}).status_code == 200
        assert client.post("/v1/act", json={"stream": "e", "obs": [0, 0, 0]}).status_code == 429  # c and d held
        assert client.post("/v1/observe", json={"decision": d, **body}).status_code == 200
        r = client.post("/v1/step", json={"stream": "c", "obs": [0, 0, 0], "reward": 1.0})
        assert r.status_code == 404 and r.json()["field"] == "stream"  # ended: it starts again with reward null
        assert client.post("/v1/act", json={"stream": "e", "obs": [0, 0, 0]}).status_code == 200
    server.close()
    steps = server.state.transitions
    server, client = _serve(tmp_path, max_streams=2, learn="inline")  # the same after a restart
    with client:
        st = client.get("/v1/status").json()
        assert (st["streams"], st["outstanding"], st["steps"]) == (2, 2, steps)
        assert client.post("/v1/act", json={"stream": "f", "obs": [0, 0, 0]}).status_code == 429
        assert client.post("/v1/step", json={"stream": "c", "obs": [0, 0, 0]}).status_code == 429


def test_a_stream_started_afresh_cuts_its_waiting_run_so_gae_does_not_chain_across_the_gap(tmp_path):
    server, client = _serve(tmp_path, learn="inline", overrides={"rollout_steps": 50})
    with client:
        client.post("/v1/step", json={"stream": "s", "obs": [0, 0, 0]})
        for k in range(3):
            client.post("/v1/step", json={"stream": "s", "obs": [0, 0, k], "reward": 1.0})
        assert [t.truncated for t in server.learner.runs["s"]] == [False, False, False]
        client.post("/v1/step", json={"stream": "s", "obs": [1, 1, 1]})  # a lost answer: the stream starts afresh
        client.post("/v1/step", json={"stream": "s", "obs": [1, 1, 2], "reward": 1.0})
        assert [t.truncated for t in server.learner.runs["s"]] == [False, False, True, False]
        state = server.learner.state_dict()
    server.close()
    restored, _ = _serve(tmp_path, learn="inline", overrides={"rollout_steps": 50})  # the cut is in the checkpoint
    assert [t.truncated for t in restored.learner.runs["s"]] == [False, False, True, False]
    assert restored.learner.state_dict()["runs"] == state["runs"]
    restored.close()


def test_the_python_client_refuses_non_finite_values_per_step_and_sends_the_rest(tmp_path):
    """JSON cannot carry NaN or an infinity: the client refuses such a value as the server refuses a bad one
    (422, naming the field), sends nothing for that step, and a batch answers it in its place while the other
    steps go through in order."""
    import math

    from lcpo.serve.client import ServeClient, ServeError

    server, client = _serve(tmp_path, learn="inline")
    with client:
        c = ServeClient("http://testserver")
        c._http = client
        with pytest.raises(ServeError) as bad:
            c.step("a", [0, math.nan, 0])
        assert (bad.value.status, bad.value.field, bad.value.local) == (422, "obs[1]", True)
        assert "obs[1] must be finite, got nan" in str(bad.value) and server.state.records == 0
        c.step("a", [0, 0, 0])
        for kwargs, field in (({"reward": math.inf}, "reward"), ({"reward": "x"}, "reward"),
                              ({"reward": 1.0, "truncated": True, "final_obs": [0, -math.inf, 0]}, "final_obs[1]"),
                              ({"reward": 1.0, "obs": ["a", 0, 0]}, "obs[0]")):
            with pytest.raises(ServeError) as bad:
                c.step("a", **{"obs": [0, 0, 1], **kwargs})
            assert bad.value.field == field and bad.value.local, kwargs
        assert server.state.records == 1
        out = c.batch([{"stream": "b", "obs": [0, 0, 0]},
                       {"stream": "b", "obs": [0, 0, 1], "reward": math.nan},  # refused by the client
                       {"stream": "b", "obs": [0, 0, 9], "reward": 1.0},       # refused by the server
                       {"stream": "b", "obs": [0, 0, 1], "reward": 1.0, "gamma": 0.5},  # not an argument
                       {"stream": "b", "obs": [0, 0, 1], "reward": 1.0}])
        assert [r.get("decision") for r in out] == ["d1", None, None, None, "d2"]
        assert (out[1]["status"], out[1]["field"], out[1]["local"]) == (422, "steps[1].reward", True)
        assert out[2]["field"] == "steps[2].obs[2]" and "local" not in out[2]
        assert out[3]["field"] == "steps[3].gamma" and "unknown field 'gamma'" in out[3]["error"]
        assert server.state.records == 3
        with pytest.raises(ServeError) as bad:
            c.observe("d2", math.nan, [0, 0, 0])
        assert bad.value.field == "reward" and bad.value.local
        for kwargs, field in (({"obs": [[0, 0, 1]]}, "obs"), ({"obs": [[0], [0], [1]]}, "obs"),  # never flattened
                              ({"obs": [0, 0, 10 ** 400]}, "obs[2]"),  # beyond float64: was a raw OverflowError
                              ({"reward": 1.0, "info": {"gamma": math.nan}}, "info.gamma"),  # was a raw ValueError
                              ({"reward": 1.0, "info": {"gamma": math.inf}}, "info.gamma")):
            with pytest.raises(ServeError) as bad:
                c.step("c", **kwargs) if "reward" not in kwargs else c.step("b", [0, 0, 1], **kwargs)
            assert bad.value.status == 422 and bad.value.field == field and bad.value.local, kwargs
        records = server.state.records
        out = c.batch([{"stream": "e", "obs": [0, 0, 0], "reward": 1.0, "info": {"gamma": math.nan}},
                       {"stream": "e", "obs": [0, 0, 0]}])  # the bad step is answered in place, the good one sent
        assert out[0]["field"] == "steps[0].info.gamma" and out[0]["local"] and "decision" in out[1]
        assert server.state.records == records + 1


def test_the_python_client_words_a_number_beyond_float64_as_the_server_does(tmp_path):
    """Before: ``reward must be a number, got 1000...`` and ``obs must be a list of numbers ... (int too large to
    convert to float)``, where the server said ``must be finite, got inf``."""
    from lcpo.serve.client import ServeClient, ServeError

    server, client = _serve(tmp_path)
    with client:
        c = ServeClient("http://testserver")
        c._http = client
        c.step("a", [0, 0, 0])
        for kwargs, field in (({"obs": [0, 0, 10 ** 400]}, "obs[2]"), ({"reward": 10 ** 400}, "reward"),
                              ({"info": {"gamma": 10 ** 400}}, "info.gamma")):
            body = {"stream": "a", "obs": [0, 0, 1], "reward": 1.0, **kwargs}
            with pytest.raises(ServeError) as local:
                c.step(**body)
            assert local.value.local and local.value.message == f"{field} = 1e+400 is beyond float64's range (±1.797e308)"
            served = client.post("/v1/step", content=json.dumps(body), headers={"content-type": "application/json"})
            assert (served.status_code, served.json()) == (422, {"error": local.value.message, "field": field})
        assert server.state.records == 1


def test_the_python_client_sends_an_episode_end_without_reward_for_the_server_to_refuse(tmp_path):
    """Before, step(reward=None, terminated=True, final_obs=...) silently dropped the end of episode."""
    from lcpo.serve.client import ServeClient, ServeError

    server, client = _serve(tmp_path, learn="inline")
    with client:
        c = ServeClient("http://testserver")
        c._http = client
        for kwargs, field in (({"terminated": True}, "terminated"), ({"truncated": True}, "truncated"),
                              ({"final_obs": [0, 0, 0]}, "final_obs"), ({"info": {"gamma": 0.5}}, "info")):
            with pytest.raises(ServeError) as bad:
                c.step("a", [0, 0, 0], **kwargs)
            assert bad.value.status == 422 and bad.value.field == field and not bad.value.local, kwargs
            assert "belongs to the previous action's reward" in str(bad.value)
        assert server.state.records == 0
        assert c.step("a", [0, 0, 0], terminated=False, info={})["decision"] == "d0"


def test_the_python_client_refuses_booleans_as_the_server_does(tmp_path):
    """Before: the client sent reward=True as 1.0 and [True, 0, 0] as [1.0, 0.0, 0.0], which the server (whose
    JSON numbers exclude booleans) refuses; the run learned from a number nobody wrote."""
    import numpy as np

    from lcpo.serve.client import ServeClient, ServeError

    server, client = _serve(tmp_path)
    with client:
        c = ServeClient("http://testserver")
        c._http = client
        c.step("a", [0, 0, 0])
        for kwargs, field in (({"obs": [0, True, 0]}, "obs[1]"), ({"reward": True}, "reward"),
                              ({"reward": np.bool_(False)}, "reward")):
            body = {"stream": "a", "obs": [0, 0, 1], "reward": 1.0, **kwargs}
            with pytest.raises(ServeError) as local:
                c.step(**body)
            assert local.value.local and local.value.field == field
            shown = "false" if isinstance(body["reward"], np.bool_) else "true"  # JSON's words (was np.False_)
            expect = "a number or null" if field == "reward" else "a number"
            assert local.value.message == f"{field} must be {expect}, got {shown}"
            if not isinstance(body["reward"], np.bool_):
                served = client.post("/v1/step", content=json.dumps(body), headers={"content-type": "application/json"})
                assert (served.status_code, served.json()) == (422, {"error": local.value.message, "field": field})
        with pytest.raises(ServeError, match="obs must be a list of numbers, got an array of booleans"):
            c.step("a", np.array([True, False, True]))
        # strings and bytes, which float() and NumPy turn into numbers, are refused in the server's words too
        for kwargs, field, shown in (({"obs": ["0", "1", "0"]}, "obs[0]", "'0'"), ({"reward": "1"}, "reward", "'1'"),
                                     ({"reward": b"1"}, "reward", "b'1'"), ({"reward": np.array(True)}, "reward",
                                                                            "array(True)"),
                                     ({"obs": [0, np.array(True), 0]}, "obs[1]", "array(True)")):
            body = {"stream": "a", "obs": [0, 0, 1], "reward": 1.0, **kwargs}
            with pytest.raises(ServeError) as local:
                c.step(**body)
            expect = "a number or null" if field == "reward" else "a number"
            assert local.value.local and local.value.message == f"{field} must be {expect}, got {shown}"
        assert c.step("a", np.array([0, 0, 1], dtype=np.int64), reward=np.float32(0.5))["policy_version"] >= 0
        assert server.state.records == 2
