"""One-core execution: small networks run fastest, and several runs share a machine best, single-threaded."""

from __future__ import annotations

import contextlib

import torch
from threadpoolctl import ThreadpoolController



__all__ = ["limit_threads"]

_controller: ThreadpoolController | None = None


def _blas() -> ThreadpoolController:
    """One controller per process: creating one scans the loaded libraries (~0.5 ms); reusing it costs ~10 us."""
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller


@contextlib.contextmanager
def limit_threads(n: int | None = 1):
    """Limit torch's intra-op threads and NumPy's BLAS threads to ``n`` inside the block (None: no change).

    The networks of this project are tiny (64 x 64); multi-threaded kernels only add synchronisation, which on a
    loaded machine slows an update by orders of magnitude. The previous torch setting is restored on exit.
    Cheap enough (about 10 us) to wrap every update of an agent used through ``act``/``observe``.
    """
    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        with _blas().limit(limits=int(n)):
            yield
    finally:
        torch.set_num_threads(before)
