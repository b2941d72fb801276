"""The straggler-mitigation (request hedging) benchmark: simulator, workloads, environment and metric.

Public names:

- :class:`Simulator`, :data:`TIMEOUTS_MS`, :func:`percentile95` (``sim.py``): the numba event loop.
- :class:`Workload` and friends (``workloads.py``): trace, synthetic and Azure workloads, file loading.
- :class:`StragglerMitigationEnv`, :func:`make_straggler_env` (``env.py``): ``lcpo/StragglerMitigation-v0``.
- :func:`bucketed_p95` (``metrics.py``): the paper's 5-minute-bucket p95 metric.
"""

from lcpo.envs.straggler.env import StragglerMitigationEnv, make_straggler_env, obs_names
from lcpo.envs.straggler.metrics import bucket_percentiles, bucketed_p95
from lcpo.envs.straggler.sim import NEVER, TIMEOUTS_MS, Simulator, SimulatorError, percentile95
from lcpo.envs.straggler.workloads import (
    AZURE_MS_PER_TOKEN,
    WORKLOAD_NAMES,
    SyntheticWorkload,
    TraceWorkload,
    Workload,
    WorkloadError,
    azure_llm_workload,
    constant_workload,
    load_workload,
    noisy_workload,
    ramp_workload,
    resolve_workload,
    validate_workload_array,
)

__all__ = [
    "StragglerMitigationEnv", "make_straggler_env", "obs_names",
    "bucket_percentiles", "bucketed_p95",
    "NEVER", "TIMEOUTS_MS", "Simulator", "SimulatorError", "percentile95",
    "AZURE_MS_PER_TOKEN", "WORKLOAD_NAMES", "SyntheticWorkload", "TraceWorkload", "Workload", "WorkloadError",
    "azure_llm_workload", "constant_workload", "load_workload", "noisy_workload", "ramp_workload",
    "resolve_workload", "validate_workload_array",
]
