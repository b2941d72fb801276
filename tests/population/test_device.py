"""Device (issue 26 item 6) on a machine without a GPU: the checks of ``--device``, the CPU default unchanged, and
the code path a GPU would run (torch acting, stacked torch Fisher-vector products, the torch env backend, device
indices) run on the CPU against the host path, including a checkpoint written on one resumed on the other.

The device path is reached on the CPU by patching :func:`lcpo.online.device.host_kernels` (True only for the CPU)
to False: every branch that a ``cuda`` device takes is then taken, on CPU tensors. What this cannot check is a
tensor left on the wrong device (on the CPU every tensor is on the right one): that needs a GPU
(``benchmarks/population.py --device cuda``).
"""

import contextlib
import json

import numpy as np
import pytest
import torch

import lcpo.online.device as device_mod
from device_checks import check_cut_resumes_on_the_host
from lcpo.cli.main import main
from lcpo.online.device import resolve_device
from lcpo.online.population import Population


def _device_path(monkeypatch) -> None:
    monkeypatch.setattr(device_mod, "host_kernels", lambda device: False)


# ---------------------------------------------------------------------------------------------- the checks
def test_resolve_device_accepts_the_cpu_and_names_every_unusable_value(monkeypatch):
    cpu = torch.device("cpu")
    assert resolve_device(None) == resolve_device("cpu") == resolve_device("cpu:0") == resolve_device(cpu) == cpu
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    bad = {"meta": r"^--device 'meta': the meta device holds no data and cannot train",
           "gpu0": r"^--device 'gpu0': not a torch device",
           "cuda": r"^--device 'cuda': no CUDA GPU here \(torch.cuda.is_available\(\) is False\)",
           "cuda:1": r"^--device 'cuda:1': no CUDA GPU here"}
    if not torch.xpu.is_available():
        bad["xpu"] = r"^--device 'xpu': torch has no available 'xpu' backend here"
    for value, message in bad.items():
        with pytest.raises(ValueError, match=message) as info:
            resolve_device(value)
        assert "\n" not in str(info.value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # two GPUs, as far as the checks can see
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match=r"^--device 'cuda:2': this machine has 2 CUDA device\(s\)"):
        resolve_device("cuda:2")


@pytest.mark.parametrize("value,message", [
    ("meta", "lcpo run: error: --device 'meta': the meta device holds no data"),
    ("cuda", "lcpo run: error: --device 'cuda': no CUDA GPU here"),
    ("tpu", "lcpo run: error: --device 'tpu': not a torch device")])
def test_lcpo_run_refuses_an_unusable_device_in_one_line_before_any_work(tmp_path, monkeypatch, capsys, value,
                                                                         message):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a fake machine without a GPU
    out = tmp_path / "out"
    assert main(["run", "--agent", "a2c", "--seed", "0-1", "--device", value, "--steps", "10", "--out",
                 str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1
    assert not (out / "a2c-s0").exists()


def test_lcpo_sweep_refuses_an_unusable_device_in_one_line(tmp_path, capsys):
    cfg = tmp_path / "s.toml"
    cfg.write_text('name = "d"\nenvs = ["lcpo/WindyPendulum-v0"]\ntraces = ["wind-3"]\nagents = ["a2c"]\n'
                   'seeds = 2\nsteps = 10\n')
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "runs"), "--device", "meta", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--device 'meta': the meta device holds no data" in err and err.count("\n") == 1
    assert not (tmp_path / "runs" / "runs").exists()


def test_device_cpu_is_the_default_bit_for_bit(tmp_path):
    common = ["run", "--agent", "a2c", "--seed", "0-1", "--steps", "600", "--trace", "wind-3", "--trace-length",
              "2000", "--set", "hidden=[16]", "--no-progress"]
    assert main(common + ["--out", str(tmp_path / "default")]) == 0
    assert main(common + ["--out", str(tmp_path / "cpu"), "--device", "cpu"]) == 0
    for seed in (0, 1):
        for name in ("episodes.csv", "diagnostics.csv", "config.json"):
            a = (tmp_path / "default" / f"a2c-s{seed}" / name).read_bytes()
            assert a == (tmp_path / "cpu" / f"a2c-s{seed}" / name).read_bytes(), name
        summary = json.loads((tmp_path / "cpu" / f"a2c-s{seed}" / "summary.json").read_text())
        assert summary["population"]["device"] == "cpu"


def _batch_native():
    from lcpo.agents.population import BATCH_NATIVE

    return sorted(BATCH_NATIVE)


@pytest.mark.parametrize("agent", _batch_native())
def test_every_batch_native_agent_takes_a_device_and_refuses_an_unusable_one(agent):
    """Parametrised over BATCH_NATIVE: an agent added there is held to the device argument too."""
    from lcpo.agents.population import make_population
    from lcpo.envs.registration import make_env

    env = make_env("lcpo/TrapGrid-v0") if agent.startswith("tabular") else make_env("lcpo/WindyPendulum-v0")
    pop = make_population(agent, env, [0, 1], device="cpu:0")
    assert pop.device == torch.device("cpu")
    assert all(p.device.type == "cpu" for p in pop.actors.params + pop.critics.params)
    state = pop.seed_state_dict(1)
    assert all(t.device.type == "cpu" for t in state["actor"].values())
    with pytest.raises(ValueError, match=r"^device 'meta': the meta device holds no data") as info:
        make_population(agent, env, [0, 1], device="meta")
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------------------- the device path
SETTINGS = {"a2c": {"hidden": [16]}, "trpo": {"hidden": [16], "rollout_steps": 400},
            "lcpo": {"hidden": [16], "reservoir_size": 600}}


def _flat(module) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in module.state_dict().values()])


@pytest.mark.parametrize("agent", sorted(SETTINGS))
def test_the_device_code_path_run_on_the_cpu_matches_the_host_path(monkeypatch, agent):
    """What a GPU runs, on the CPU, against today's host kernels: the same decisions (episodes, constrained and
    accepted steps), parameters within 5e-5 of their scale after 2-6 updates, returns within 1e-6 relative.

    The two paths differ in float rounding only (torch's sin/cos against numba's in the env, the stacked torch
    Fisher-vector products against the NumPy ones, log-probabilities as ``z - logsumexp(z)``); TRPO's full
    natural-gradient step, scaled by ``sqrt(2 delta / s'Hs)``, carries them furthest (1.2e-5 of the scale
    measured with the stacked product, 2026-12-04; 2.5e-5 with per-seed autograd products, 2026-12-02)."""
    kw = dict(seeds=[0, 1, 2], trace="wind-1", trace_length=2000, **SETTINGS[agent])
    steps = 1200 if agent == "lcpo" else 800  # LCPO: its reservoir fills, then anchored updates
    host = Population(agent, **kw).learn(steps)
    _device_path(monkeypatch)
    dev = Population(agent, **kw).learn(steps)
    assert dev.stream.venv.unwrapped._dev is not None and host.stream.venv.unwrapped._dev is None  # torch env
    assert dev.agents._acting.on_device and not host.agents._acting.on_device  # torch acting
    for k in range(3):
        a, b = np.array(host.episodes[k], dtype=float), np.array(dev.episodes[k], dtype=float)
        assert a.shape == b.shape and len(a) >= 4
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-9)
        for net in ("actors", "critics"):
            pa = _flat(getattr(host.agents, net).members[k])
            pb = _flat(getattr(dev.agents, net).members[k])
            assert float((pa - pb).abs().max()) <= 5e-5 * float(pa.abs().max()), (net, k)
    if agent in ("lcpo", "trpo"):
        assert (host.agents.seed_accepted_steps == dev.agents.seed_accepted_steps).all()
    if agent == "lcpo":
        assert (host.agents.seed_constrained_updates > 0).all()  # the anchored step (stacked torch Fisher) ran
        assert (host.agents.seed_constrained_updates == dev.agents.seed_constrained_updates).all()


def test_a_checkpoint_of_the_device_path_resumes_on_the_host_path(tmp_path, monkeypatch):
    """A population stopped at step 400 on the device path (its checkpoints hold CPU tensors) resumes on the
    host path and ends where the host path alone ends (within the device path's tolerance)."""

    @contextlib.contextmanager
    def device_path():
        with monkeypatch.context() as m:
            _device_path(m)
            yield

    check_cut_resumes_on_the_host(tmp_path, 1e-6, cut_context=device_path)
