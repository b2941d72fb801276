"""Training imports no compiler (lcpo.online.torch_startup, issue 24 item 9): PyTorch's optimizers would import
torch._dynamo on first use, as long again as `import torch`; eager results are unchanged, torch.compile works."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_TRAIN = """
import hashlib, json, sys
if {plain!r}:
    import lcpo.online.torch_startup as startup
    startup._done = True  # PyTorch as it comes: the first optimizer imports torch._dynamo
import gymnasium as gym
import torch
import lcpo.envs
from lcpo.agents import AGENTS
for name, kw in (("a2c", {{"rollout_steps": 100}}), ("sac", {{"learning_starts": 100}})):
    agent = AGENTS[name](gym.make("lcpo/ContinuingChain-v0"), seed=0, **kw)
    agent.learn(300)
    state = agent.state_dict()
    agent.load_state_dict(state)
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in agent.actor.parameters())).hexdigest()
print(json.dumps({{"digest": digest, "dynamo": "torch._dynamo" in sys.modules}}))
"""


def _train(plain: bool) -> dict:
    done = subprocess.run([sys.executable, "-c", _TRAIN.format(plain=plain)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_training_imports_no_compiler():
    assert _train(plain=False)["dynamo"] is False  # torch._dynamo was never imported


@pytest.mark.slow
def test_training_learns_the_same_as_with_pytorch_as_it_comes():
    deferred, plain = _train(plain=False), _train(plain=True)
    assert plain["dynamo"] is True  # PyTorch as it comes imports the compiler
    assert deferred["digest"] == plain["digest"]  # bit-identical weights after updates, a checkpoint and a load


@pytest.mark.slow
def test_torch_compile_still_works_after_the_deferral():
    import torch

    import lcpo.online.threads  # noqa: F401 - installs the deferral

    m = torch.nn.Linear(2, 1)
    opt = torch.optim.Adam(m.parameters())

    def step():
        m(torch.ones(1, 2)).sum().backward()
        opt.step()

    before = m.weight.detach().clone()
    torch.compile(step, backend="eager")()
    assert "torch._dynamo" in sys.modules and not torch.equal(before, m.weight)
