"""Sweep config validation (errors name the bad key), expansion counts, and stable run ids."""

from pathlib import Path

import pytest

from lcpo.experiments.config import ConfigError, expand, load_config, make_run_id, parse_config

FAKE = "lcpo_fake_run"
REPO = Path(__file__).resolve().parents[2]


def base(**kw):
    d = {"name": "t", "steps": 1000, "seeds": 2, "envs": ["lcpo/WindyPendulum-v0"], "traces": ["wind-1"],
         "agents": ["lcpo", "a2c"]}
    d.update(kw)
    return d


def test_expansion_count_is_the_product_of_the_axes():
    cfg = parse_config(base(seeds=3, traces=["wind-1", "wind-2"],
                            overrides={"lcpo": {"ood_threshold": [0.5, 1.0], "reservoir_size": [10, 20, 30]},
                                       "a2c": {"bonus": 1.0}}), executor=FAKE)
    specs = expand(cfg, executor=FAKE)
    # 2 traces x (lcpo: 2 x 3 override combos + a2c: 1) x 3 seeds
    assert len(specs) == 2 * (2 * 3 + 1) * 3
    assert len({s.run_id for s in specs}) == len(specs)
    lcpo = [s.config for s in specs if s.config["agent"] == "lcpo"]
    assert {(c["overrides"]["ood_threshold"], c["overrides"]["reservoir_size"]) for c in lcpo} == {
        (o, r) for o in (0.5, 1.0) for r in (10, 20, 30)}
    assert all(s.config["overrides"] == {"bonus": 1.0} for s in specs if s.config["agent"] == "a2c")


def test_seed_count_and_list_and_trace_steps():
    assert parse_config(base(seeds=4), executor=FAKE).seeds == (0, 1, 2, 3)
    assert parse_config(base(seeds=[3, 7]), executor=FAKE).seeds == (3, 7)
    cfg = parse_config(base(traces=["wind-1", "wind-3"], warmup_steps=100, trace_length=5000, seeds=1,
                            per_trace={"wind-3": {"steps": 400, "trace_length": 800}}), executor=FAKE)
    got = {s.config["trace"]: (s.config["steps"], s.config["trace_length"], s.config["warmup_steps"])
           for s in expand(cfg, executor=FAKE)}
    assert got == {"wind-1": (1000, 5000, 100), "wind-3": (400, 800, 100)}


def test_seed_values_a_run_cannot_take_or_too_many_are_refused_naming_the_key():
    """`seeds = 99999999999999999999` ended in an OverflowError traceback, `seeds = 1000000000` hung expanding a
    billion runs, and `seeds = [18446744073709551616]` was accepted (the run then fails deep inside torch)."""
    import time

    t0 = time.process_time()
    for bad, msg in ((99999999999999999999, r"seeds: 99,999,999,999,999,999,999 seeds; at most 10,000"),
                     (1_000_000_000, r"seeds: 1,000,000,000 seeds; at most 10,000"),
                     ([0, 2**64], r"seeds\[1\]: seeds must lie in 0\.\.2\*\*64-1 \(18446744073709551615\), got "
                                  r"18446744073709551616"),
                     (list(range(10_001)), r"seeds: 10,001 seeds; at most 10,000")):
        with pytest.raises(ConfigError, match=msg):
            parse_config(base(seeds=bad), executor=FAKE)
    with pytest.raises(ConfigError, match=r"per_agent\.a2c\.seeds: 1,000,000,000 seeds"):
        parse_config(base(per_agent={"a2c": {"seeds": 1_000_000_000}}), executor=FAKE)
    assert time.process_time() - t0 < 1.0
    assert parse_config(base(seeds=[2**64 - 1]), executor=FAKE).seeds == (2**64 - 1,)
    assert len(parse_config(base(seeds=10_000), executor=FAKE).seeds) == 10_000


def test_per_agent_seeds_replace_the_global_seeds_for_that_agent_only():
    cfg = parse_config(base(seeds=3, per_agent={"a2c": {"seeds": 5}, "lcpo": {"seeds": [2, 9]}}), executor=FAKE)
    seeds = {}
    for s in expand(cfg, executor=FAKE):
        seeds.setdefault(s.config["agent"], []).append(s.config["seed"])
    assert seeds == {"lcpo": [2, 9], "a2c": [0, 1, 2, 3, 4]}
    plain = expand(parse_config(base(seeds=3), executor=FAKE), executor=FAKE)
    # an agent without a per_agent entry keeps the global seeds, and its runs keep their ids
    cfg = parse_config(base(seeds=3, per_agent={"a2c": {"seeds": 1}}), executor=FAKE)
    assert [s.run_id for s in expand(cfg, executor=FAKE) if s.config["agent"] == "lcpo"] == \
        [s.run_id for s in plain if s.config["agent"] == "lcpo"]


@pytest.mark.parametrize("patch, key", [
    ({"per_agent": {"ppo": {"seeds": 2}}}, "per_agent.ppo"),
    ({"per_agent": {"a2c": {"seedz": 2}}}, "per_agent.a2c.seedz"),
    ({"per_agent": {"a2c": {"seeds": 0}}}, "per_agent.a2c.seeds"),
    ({"per_agent": {"a2c": {"seeds": [1, 1]}}}, "per_agent.a2c.seeds"),
    ({"per_agent": {"a2c": 3}}, "per_agent.a2c"),
    ({"stepz": 10}, "stepz"),
    ({"steps": "100"}, "steps"),
    ({"steps": True}, "steps"),
    ({"steps": 0}, "steps"),
    ({"seeds": [0, 0]}, "seeds"),
    ({"seeds": [0, -1]}, "seeds[1]"),
    ({"agents": ["lcpo", "dqn9"]}, "agents[1]"),
    ({"envs": ["lcpo/NoSuchEnv-v0"]}, "envs[0]"),
    ({"traces": []}, "traces"),
    ({"traces": ["wind-1", "nosuch"]}, "traces[1]"),
    ({"traces": ["no/such/file.npy"]}, "traces[0]"),
    ({"reset": "sometimes"}, "reset"),
    ({"warmup_steps": 1000}, "warmup_steps"),
    ({"overrides": {"ppo": {"bonus": 1}}}, "overrides.ppo"),
    ({"overrides": {"lcpo": {"bonus": float("nan")}}}, "overrides.lcpo.bonus"),
    ({"overrides": {"lcpo": {"bonus": []}}}, "overrides.lcpo.bonus"),
    ({"env_kwargs": {"lcpo/Other-v0": {}}}, "env_kwargs.lcpo/Other-v0"),
    ({"per_trace": {"wind-9": {"steps": 10}}}, "per_trace.wind-9"),
    ({"per_trace": {"wind-1": {"stepz": 10}}}, "per_trace.wind-1.stepz"),
    ({"per_trace": {"wind-1": {"steps": 10}}, "warmup_steps": 10}, "warmup_steps"),
    ({"trace_length": 2.5}, "trace_length"),
    ({"tensorboard": "yes"}, "tensorboard"),
])
def test_validation_errors_name_the_bad_key(patch, key):
    with pytest.raises(ConfigError) as err:
        parse_config(base(**patch), source="my.toml", executor=FAKE)
    assert str(err.value).startswith(f"my.toml: {key}:"), str(err.value)


def test_values_are_quoted_in_the_toml_file_s_words():
    """TOML writes true and false (and the sweep's JSON files null): messages quote them so (were True, None)."""
    for patch, message in (({"steps": True}, "my.toml: steps: expected an integer, got true"),
                           ({"seeds": True}, "my.toml: seeds: expected a positive integer count or a non-empty list, "
                                             "got true"),
                           ({"agents": [True]}, "my.toml: agents[0]: expected a non-empty string, got true")):
        with pytest.raises(ConfigError) as err:
            parse_config(base(**patch), source="my.toml", executor=FAKE)
        assert str(err.value) == message


def test_unknown_trace_is_a_config_error_listing_valid_names(tmp_path, capsys):
    with pytest.raises(ConfigError) as err:
        parse_config(base(traces=["wind-1", "nosuch"]), source="my.toml", executor=FAKE)
    msg = str(err.value)
    assert "traces[1]" in msg and "'nosuch'" in msg
    for name in ("wind-1", "wind-4", "ndbc-46002", "zero"):
        assert repr(name) in msg
    # the CLI's dry run rejects it up front (exit status 2) instead of listing runs that would fail
    cfg = tmp_path / "bad.toml"
    cfg.write_text('steps = 10\nenvs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-1", "nosuch"]\n'
                   'agents = ["lcpo"]\n')
    from lcpo.cli import sweep as sweep_cli
    assert sweep_cli.main([str(cfg), "--out", str(tmp_path / "runs"), "--dry-run"]) == 2
    assert "traces[1]: unknown trace name 'nosuch'" in capsys.readouterr().err


def test_trace_files_and_env_specific_names_are_accepted(tmp_path):
    trace = tmp_path / "my_trace.npy"
    trace.write_bytes(b"not even read")  # only existence is checked at validation; no trace is loaded
    assert parse_config(base(traces=[str(trace), "wind-2"]), executor=FAKE).traces == (str(trace), "wind-2")
    # the straggler environment's trace argument takes workload names, not wind trace names
    cfg = parse_config(base(envs=["lcpo/StragglerMitigation-v0"], traces=["azure-llm"]), executor=FAKE)
    assert cfg.traces == ("azure-llm",)
    with pytest.raises(ConfigError, match=r"traces\[0\]: unknown trace name 'wind-1'.*azure-llm"):
        parse_config(base(envs=["lcpo/StragglerMitigation-v0"]), executor=FAKE)


def test_missing_required_key():
    d = base()
    del d["agents"]
    with pytest.raises(ConfigError, match="agents: missing required key"):
        parse_config(d, executor=FAKE)


def test_unknown_hyperparameter_is_named_at_expansion():
    cfg = parse_config(base(overrides={"a2c": {"reservoir_size": [1, 2]}}), executor=FAKE)
    with pytest.raises(ConfigError, match="overrides.a2c.*reservoir_size"):
        expand(cfg, executor=FAKE)


def test_toml_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("steps = = 3\n")
    with pytest.raises(ConfigError, match="bad.toml: not valid TOML"):
        load_config(bad, executor=FAKE)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml", executor=FAKE)


def test_run_id_is_stable_readable_and_hash_sensitive():
    cfg = {"env": "lcpo/WindyPendulum-v0", "trace": "wind-1", "trace_length": None, "agent": "lcpo", "steps": 10,
           "seed": 3, "overrides": {"ood_threshold": 0.5}, "env_kwargs": {}, "warmup_steps": 0, "reset": "end",
           "checkpoint_every": 5, "tensorboard": False}
    rid = make_run_id(cfg)
    assert rid == make_run_id(dict(reversed(list(cfg.items()))))  # key order does not matter
    assert rid.startswith("WindyPendulum-v0_wind-1_lcpo_ood_threshold=0.5_s3-")
    assert len(rid.rsplit("-", 1)[1]) == 8
    assert make_run_id({**cfg, "steps": 11}) != rid  # fields not shown still change the hash
    assert "/" not in make_run_id({**cfg, "trace": "/data/my trace.npy"})


@pytest.mark.parametrize("name", ["smoke", "paper-mini", "paper-pendulum", "study-pendulum", "study-pendulum-extra",
                                  "study-mujoco", "study-straggler"])
def test_presets_parse(name):
    # agent names are checked against lcpo.online.run.AGENTS when it exists; not against the fake's
    cfg = load_config(REPO / "configs" / f"{name}.toml", executor="no_such_executor_module")
    specs = expand(cfg, executor="no_such_executor_module")
    assert len(specs) >= 2
    assert cfg.name == name


def test_toml_with_a_byte_order_mark_is_read(tmp_path):
    """Issue 24 item 7: some editors write a UTF-8 BOM; it is skipped, not "Invalid statement"."""
    path = tmp_path / "bom.toml"
    path.write_text('\ufeffname = "t"\nsteps = 1000\nseeds = 2\nenvs = ["lcpo/WindyPendulum-v0"]\n'
                    'traces = ["wind-1"]\nagents = ["lcpo", "a2c"]\n', encoding="utf-8")
    assert load_config(path, executor=FAKE) == parse_config(base(), source=str(path), executor=FAKE)
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'name = "caf\xe9"\n')
    with pytest.raises(ConfigError, match="latin.toml: not UTF-8"):
        load_config(latin, executor=FAKE)
