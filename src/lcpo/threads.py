"""One-core execution: small networks run fastest, and several runs share a machine best, single-threaded."""

from __future__ import annotations

import contextlib

import torch
from threadpoolctl import threadpool_limits

__all__ = ["limit_threads"]


@contextlib.contextmanager
def limit_threads(n: int | None = 1):
    """Limit torch's intra-op threads and NumPy's BLAS threads to ``n`` inside the block (None: no change).

    The networks of this project are tiny (64 x 64); multi-threaded kernels only add synchronisation, which on a
    loaded machine slows an update by orders of magnitude. The previous torch setting is restored on exit.
    """
    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        with threadpool_limits(int(n)):
            yield
    finally:
        torch.set_num_threads(before)
