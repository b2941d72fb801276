"""Model-based pieces shared by MBPO and MBCD: an ensemble dynamics model and a CUSUM change detector.

* :class:`EnsembleDynamics`: ``E`` independently initialised MLPs (batched, one ``baddbmm`` per layer) that map
  ``x = [obs, action features]`` to ``y = [next_obs - obs, reward]`` (Chua et al. 2018; Janner et al. 2019,
  "When to trust your model", sec. 5). Inputs and outputs are standardized with statistics of the data last fitted.
  Each member is a deterministic regressor trained by MSE on its own minibatches; the predictive distribution of
  a member is Gaussian with a per-output residual variance estimated on the fitted data (homoscedastic, a
  simplification of the heteroscedastic probabilistic ensembles of the papers). Samples pick a member uniformly
  per input (the "TS-1" propagation of Chua et al.).
* :class:`CUSUM`: the one-sided CUSUM of Page (1954) on a standardized statistic ``z_t``:
  ``S_t = max(0, S_{t-1} + z_t - k)``, alarm when ``S_t > h`` (then ``S`` restarts at 0). For ``z ~ N(0, 1)`` in
  control, Siegmund's approximation gives the mean run length to a false alarm
  ``ARL_0 = (exp(2 k b) - 2 k b - 1) / (2 k^2)`` and, after a mean shift ``delta > k``, the mean detection delay
  ``ARL_1 = (exp(-2 D b) + 2 D b - 1) / (2 D^2)`` with ``D = delta - k`` and ``b = h + 1.166``
  (:func:`cusum_run_length`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

__all__ = ["CUSUM", "EnsembleDynamics", "cusum_run_length", "one_hot_actions"]


def one_hot_actions(actions: np.ndarray, bins: int) -> np.ndarray:
    """``(B, D)`` integer bins -> ``(B, D * bins)`` float32 one-hot features.

    Raises:
        ValueError: on a bin outside ``[0, bins)`` or a non-2-D array.
    """
    a = np.asarray(actions)
    if a.ndim != 2:
        raise ValueError(f"actions must be (B, D) bin indices, got shape {a.shape}")
    if a.size and (a.min() < 0 or a.max() >= bins):
        raise ValueError(f"action bins must lie in [0, {bins}), got values in [{a.min()}, {a.max()}]")
    out = np.zeros((a.shape[0], a.shape[1] * bins), dtype=np.float32)
    cols = (np.arange(a.shape[1]) * bins)[None, :] + a
    np.put_along_axis(out, cols.astype(np.int64), 1.0, axis=1)
    return out


def cusum_run_length(k: float, h: float, delta: float = 0.0) -> float:
    """Siegmund's approximation of the mean run length of :class:`CUSUM` for ``z ~ N(delta, 1)``.

    Args:
        k: reference value (allowance) in standard deviations.
        h: decision threshold.
        delta: mean of ``z`` (0: in control, the false-alarm run length; > 0: the detection delay).

    Returns:
        the approximate mean number of samples to an alarm.
    """
    d, b = delta - k, h + 1.166
    if abs(d) < 1e-12:
        return b * b
    return (math.exp(-2 * d * b) + 2 * d * b - 1) / (2 * d * d)


class CUSUM:
    """One-sided upper CUSUM (Page 1954) on standardized samples (see module docstring).

    Args:
        k: reference value subtracted from every sample (half the shift to detect, in standard deviations).
        h: alarm threshold > 0.

    Raises:
        ValueError: on a non-finite ``k`` or a non-positive / non-finite ``h``.
    """

    def __init__(self, k: float = 0.5, h: float = 15.0):
        if not math.isfinite(k):
            raise ValueError(f"CUSUM reference value k must be finite, got {k}")
        if not (math.isfinite(h) and h > 0):
            raise ValueError(f"CUSUM threshold h must be a finite number > 0, got {h}")
        self.k, self.h = float(k), float(h)
        self.stat = 0.0

    def update(self, z: float) -> bool:
        """Add one standardized sample; True (and a restart at 0) when the statistic exceeds ``h``.

        Raises:
            ValueError: on a non-finite sample.
        """
        if not math.isfinite(z):
            raise ValueError(f"CUSUM sample must be finite, got {z}")
        self.stat = max(0.0, self.stat + z - self.k)
        if self.stat > self.h:
            self.stat = 0.0
            return True
        return False

    def reset(self) -> None:
        """Restart the statistic at 0."""
        self.stat = 0.0


class _EnsembleMLP(torch.nn.Module):
    def __init__(self, members: int, sizes: list[int]):
        super().__init__()
        self.weights = torch.nn.ParameterList()
        self.biases = torch.nn.ParameterList()
        for i, o in itertools.pairwise(sizes):
            bound = 1.0 / math.sqrt(i)
            self.weights.append(torch.nn.Parameter(torch.empty(members, i, o).uniform_(-bound, bound)))
            self.biases.append(torch.nn.Parameter(torch.empty(members, 1, o).uniform_(-bound, bound)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (E, B, in) -> (E, B, out)
        last = len(self.weights) - 1
        for j, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = torch.baddbmm(b, x, w)
            if j < last:
                x = torch.nn.functional.silu(x)
        return x


class EnsembleDynamics:
    """An ensemble of ``members`` MLP dynamics models ``x = [obs, act] -> y = [next_obs - obs, reward]``.

    Args:
        obs_dim: observation size.
        act_dim: action feature size (e.g. ``D * K`` one-hot features).
        members: ensemble size ``E``.
        hidden: hidden layer sizes (SiLU); ``()`` makes every member linear.
        lr: Adam learning rate.
        weight_decay: Adam L2 weight decay.
        seed: seed of the weight initialisation (the global torch RNG is left untouched).

    Raises:
        ValueError: on non-positive sizes or a non-positive learning rate.
    """

    #: most samples used to estimate the residual variances after a fit
    VAR_SAMPLES = 8192

    def __init__(self, obs_dim: int, act_dim: int, members: int = 5, hidden=(200, 200), lr: float = 1e-3,
                 weight_decay: float = 1e-5, seed: int = 0):
        if obs_dim < 1 or act_dim < 0 or members < 1 or any(int(h) < 1 for h in hidden):
            raise ValueError(f"bad ensemble sizes: obs_dim={obs_dim}, act_dim={act_dim}, members={members}, "
                             f"hidden={tuple(hidden)}")
        if not (math.isfinite(lr) and lr > 0):
            raise ValueError(f"ensemble learning rate must be a finite number > 0, got {lr}")
        self.obs_dim, self.act_dim, self.members = int(obs_dim), int(act_dim), int(members)
        in_dim, out_dim = self.obs_dim + self.act_dim, self.obs_dim + 1
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.net = _EnsembleMLP(self.members, [in_dim, *map(int, hidden), out_dim])
        self.opt = torch.optim.Adam(self.net.parameters(), lr=lr, weight_decay=weight_decay)
        self.x_mean, self.x_std = torch.zeros(in_dim), torch.ones(in_dim)
        self.y_mean, self.y_std = torch.zeros(out_dim), torch.ones(out_dim)
        self.residual_var = torch.ones(out_dim)  # per output, in standardized units
        self.fits = 0

    @staticmethod
    def _xy(obs, act, rewards=None, next_obs=None):
        x = torch.cat([torch.as_tensor(obs, dtype=torch.float32), torch.as_tensor(act, dtype=torch.float32)], -1)
        if rewards is None:
            return x, None
        o = torch.as_tensor(obs, dtype=torch.float32)
        y = torch.cat([torch.as_tensor(next_obs, dtype=torch.float32) - o,
                       torch.as_tensor(rewards, dtype=torch.float32).reshape(-1, 1)], -1)
        return x, y

    def _check(self, x: torch.Tensor, y: torch.Tensor | None) -> None:
        if x.ndim != 2 or x.shape[1] != self.obs_dim + self.act_dim:
            raise ValueError(f"inputs must be (B, {self.obs_dim} + {self.act_dim}); got {tuple(x.shape)}")
        if not torch.isfinite(x).all() or (y is not None and not torch.isfinite(y).all()):
            raise ValueError("ensemble dynamics data contain NaN or inf")

    def fit(self, obs, act, rewards, next_obs, steps: int, batch_size: int, rng: np.random.Generator) -> float:
        """``steps`` Adam steps on the MSE of every member (each on its own uniformly drawn minibatch), after
        re-standardizing with the statistics of this data; then re-estimate the residual variances on it (on a uniform
        subset of :attr:`VAR_SAMPLES` samples when there are more).

        Args:
            obs: ``(N, obs_dim)``; act: ``(N, act_dim)``; rewards: ``(N,)``; next_obs: ``(N, obs_dim)``.
            steps: gradient steps; batch_size: samples per member and step.
            rng: the generator of the minibatch indices.

        Returns:
            the mean standardized MSE of the last step.

        Raises:
            ValueError: on mismatched shapes or non-finite data.
        """
        x, y = self._xy(obs, act, rewards, next_obs)
        self._check(x, y)
        n = x.shape[0]
        self.x_mean, self.x_std = x.mean(0), x.std(0, unbiased=False).clamp(min=1e-6)
        self.y_mean, self.y_std = y.mean(0), y.std(0, unbiased=False).clamp(min=1e-6)
        xs, ys = (x - self.x_mean) / self.x_std, (y - self.y_mean) / self.y_std
        loss = torch.zeros(())
        for _ in range(int(steps)):
            idx = torch.from_numpy(rng.integers(n, size=(self.members, batch_size)))
            loss = (self.net(xs[idx]) - ys[idx]).pow(2).mean()
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
        if n > self.VAR_SAMPLES:  # a uniform subset bounds the cost on large buffers
            sub = torch.from_numpy(rng.choice(n, self.VAR_SAMPLES, replace=False))
            xs, ys = xs[sub], ys[sub]
        with torch.no_grad():
            self.residual_var = (self.net(xs.expand(self.members, -1, -1)) - ys).pow(2).mean((0, 1)).clamp(min=1e-6)
        self.fits += 1
        return loss.item()

    @torch.no_grad()
    def predict(self, obs, act) -> torch.Tensor:
        """``(E, B, obs_dim + 1)`` every member's mean prediction of ``[next_obs - obs, reward]`` (raw units)."""
        x, _ = self._xy(obs, act)
        self._check(x, None)
        out = self.net(((x - self.x_mean) / self.x_std).expand(self.members, -1, -1))
        return out * self.y_std + self.y_mean

    @torch.no_grad()
    def sample(self, obs, act, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Sampled next observations ``(B, obs_dim)`` float32 and rewards ``(B,)`` float64: a uniformly drawn member
        per input, plus Gaussian noise of the residual variance."""
        pred = self.predict(obs, act).numpy()
        B = pred.shape[1]
        member = rng.integers(self.members, size=B)
        noise = rng.standard_normal((B, self.obs_dim + 1)) * (self.residual_var.sqrt() * self.y_std).numpy()
        y = pred[member, np.arange(B)] + noise
        return (np.asarray(obs, dtype=np.float64) + y[:, :-1]).astype(np.float32), y[:, -1].astype(np.float64)

    @torch.no_grad()
    def surprise(self, obs, act, rewards, next_obs) -> np.ndarray:
        """``(B,)`` standardized squared error of the ensemble mean:
        ``z = (sum_i r_i^2 / v_i - n) / sqrt(2 n)`` over the ``n = obs_dim + 1`` outputs, with ``r`` the
        standardized residual and ``v`` the residual variance (mean 0, variance 1 if the residuals are the
        model's Gaussians)."""
        x, y = self._xy(obs, act, rewards, next_obs)
        self._check(x, y)
        mean = self.net(((x - self.x_mean) / self.x_std).expand(self.members, -1, -1)).mean(0)
        r2 = ((mean - (y - self.y_mean) / self.y_std).pow(2) / self.residual_var).sum(-1)
        n = y.shape[1]
        return ((r2 - n) / math.sqrt(2 * n)).double().numpy()

    def state_dict(self) -> dict:
        """Weights, optimizer, standardization statistics, residual variances and the fit count."""
        return {"net": self.net.state_dict(), "opt": self.opt.state_dict(), "x_mean": self.x_mean.clone(),
                "x_std": self.x_std.clone(), "y_mean": self.y_mean.clone(), "y_std": self.y_std.clone(),
                "residual_var": self.residual_var.clone(), "fits": self.fits}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output exactly.

        Raises:
            KeyError/RuntimeError: on missing or mis-shaped entries.
        """
        self.net.load_state_dict(state["net"])
        self.opt.load_state_dict(state["opt"])
        for k in ("x_mean", "x_std", "y_mean", "y_std", "residual_var"):
            setattr(self, k, state[k].clone().float())
        self.fits = int(state["fits"])
