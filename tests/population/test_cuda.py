"""A population on a real CUDA GPU (issue 26 item 6): skipped where ``torch.cuda.is_available()`` is False (CI
and the development machine), run on a machine with a GPU by
``python -m pytest tests/population/test_cuda.py`` (docs/benchmarks.md, "Populations on a device").

What the CPU cannot check (tests/population/test_device.py runs the same code path on CPU tensors): a tensor
left on the wrong device, a host copy missing, a checkpoint holding GPU tensors. Against the CPU's host path: the
same decisions (episode boundaries, constrained and accepted steps), returns and parameters within the float
rounding of a different device (cuBLAS's and the GPU's reduction orders, its sin/cos).
"""

import json

import numpy as np
import pytest
import torch

from device_checks import check_cut_resumes_on_the_host, episode_returns
from lcpo.cli.main import main
from lcpo.online.population import Population

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SETTINGS = {"a2c": {"hidden": [16]}, "trpo": {"hidden": [16], "rollout_steps": 400},
            "lcpo": {"hidden": [16], "reservoir_size": 600}}


def _flat(module) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1).double().cpu() for t in module.state_dict().values()])


@pytest.mark.parametrize("agent", sorted(SETTINGS))
def test_a_population_on_the_gpu_matches_the_host_path(agent):
    """Every network tensor and the env's state live on the GPU; episodes, constrained and accepted steps are the
    CPU's; returns within 1e-5 relative and parameters within 1e-4 of their scale after 2-6 updates (the CPU's
    own device code path keeps 5e-5, tests/population/test_device.py; the figures measured are printed)."""
    kw = dict(seeds=[0, 1, 2], trace="wind-1", trace_length=2000, **SETTINGS[agent])
    steps = 1200 if agent == "lcpo" else 800
    host = Population(agent, **kw).learn(steps)
    dev = Population(agent, device="cuda", **kw).learn(steps)
    assert dev.device.startswith("cuda")
    for net in ("actors", "critics"):
        assert all(p.device.type == "cuda" for p in getattr(dev.agents, net).params)
    assert dev.stream.venv.unwrapped._dev is not None and dev.agents._acting.on_device
    worst_param, worst_return = 0.0, 0.0
    for k in range(3):
        a, b = np.array(host.episodes[k], dtype=float), np.array(dev.episodes[k], dtype=float)
        assert a.shape == b.shape and len(a) >= 4
        worst_return = max(worst_return, float(np.max(np.abs(b - a) / np.maximum(np.abs(a), 1e-9))))
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-9)
        for net in ("actors", "critics"):
            pa, pb = _flat(getattr(host.agents, net).members[k]), _flat(getattr(dev.agents, net).members[k])
            gap = float((pa - pb).abs().max() / pa.abs().max())
            worst_param = max(worst_param, gap)
            assert gap <= 1e-4, (net, k, gap)
    print(f"\n{agent}: largest parameter gap {worst_param:.2e} of scale, largest relative return gap "
          f"{worst_return:.2e}")
    if agent in ("lcpo", "trpo"):
        assert (host.agents.seed_accepted_steps == dev.agents.seed_accepted_steps).all()
    if agent == "lcpo":
        assert (host.agents.seed_constrained_updates > 0).all()
        assert (host.agents.seed_constrained_updates == dev.agents.seed_constrained_updates).all()


def test_a_gpu_checkpoint_holds_cpu_tensors_and_resumes_on_the_cpu(tmp_path):
    """A population stopped at step 400 on the GPU writes CPU tensors only; resumed on the CPU it ends where the
    CPU alone ends, within the device's rounding."""
    check_cut_resumes_on_the_host(tmp_path, 1e-5, device="cuda")


def test_lcpo_run_on_cuda_writes_each_seed_folder_and_names_the_device(tmp_path):
    """The CLI end to end on the GPU: one folder per seed, summary.json naming the device and the population."""
    out = tmp_path / "out"
    assert main(["run", "--agent", "lcpo", "--seed", "0-3", "--device", "cuda", "--steps", "1500", "--trace",
                 "wind-1", "--trace-length", "2000", "--set", "reservoir_size=600", "--no-progress", "--out",
                 str(out)]) == 0
    for s in range(4):
        summary = json.loads((out / f"lcpo-s{s}" / "summary.json").read_text())
        assert summary["population"]["device"].startswith("cuda") and summary["population"]["size"] == 4
        assert np.isfinite(summary["lifelong_return"]) and len(episode_returns(out / f"lcpo-s{s}")) >= 7
