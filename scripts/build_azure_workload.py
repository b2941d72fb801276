"""Build the bundled Azure LLM straggler workload ``src/lcpo/data/azure_llm_workload.npy``.

Source: the Azure LLM inference trace 2023 (code and conversation services, CC BY 4.0), see
``shared/data/azure_llm_inference_2023/PROVENANCE.md`` and ``src/lcpo/data/PROVENANCE_azure.md``.

Construction:

1. Read both CSV files, parse ``TIMESTAMP`` (no time zone; only differences are used) and merge the
   requests of the two services, sorted by arrival time (stable: ties keep code before conversation).
2. Processing time (ms) = ``AZURE_MS_PER_TOKEN`` (1.25 ms) x ``GeneratedTokens`` (decode time is about
   proportional to the output length; the scale puts the offered load without hedging at ~0.3 for 10 servers).
3. Inter-arrival time (ms) = difference of consecutive arrival times; the first row, which has no predecessor,
   gets the trace's mean inter-arrival time (the gap used when the trace wraps).
4. Save as a ``(n, 2)`` float32 ``.npy`` (processing ms, inter-arrival ms).

Usage:
    python scripts/build_azure_workload.py [--src DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from lcpo.envs.straggler.workloads import AZURE_MS_PER_TOKEN, validate_workload_array

FILES = ("AzureLLMInferenceTrace_code.csv", "AzureLLMInferenceTrace_conv.csv")


def build(src: Path) -> np.ndarray:
    """Return the ``(n, 2)`` float32 workload built from the two CSV files in ``src``.

    Raises:
        FileNotFoundError: a source file is missing.
        ValueError: a file lacks the ``TIMESTAMP`` or ``GeneratedTokens`` column, or the result is invalid.
    """
    frames = []
    for name in FILES:
        path = src / name
        if not path.exists():
            raise FileNotFoundError(f"{path}: Azure trace file not found")
        df = pd.read_csv(path)
        for col in ("TIMESTAMP", "GeneratedTokens"):
            if col not in df.columns:
                raise ValueError(f"{path}: missing column {col!r} (has {list(df.columns)})")
        frames.append(pd.DataFrame({"t": pd.to_datetime(df["TIMESTAMP"]), "tokens": df["GeneratedTokens"]}))
    df = pd.concat(frames, ignore_index=True).sort_values("t", kind="stable").reset_index(drop=True)
    t_ms = (df["t"] - df["t"].iloc[0]).dt.total_seconds().to_numpy() * 1000.0
    ia = np.diff(t_ms, prepend=np.nan)
    ia[0] = t_ms[-1] / (len(t_ms) - 1)
    proc = AZURE_MS_PER_TOKEN * df["tokens"].to_numpy(np.float64)
    out = np.stack([proc, ia], axis=1).astype(np.float32)
    validate_workload_array(out, "azure workload")
    return out


def main() -> None:
    here = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=here.parent / "shared" / "data" / "azure_llm_inference_2023")
    ap.add_argument("--out", type=Path, default=here / "src" / "lcpo" / "data" / "azure_llm_workload.npy")
    args = ap.parse_args()
    arr = build(args.src)
    np.save(args.out, arr)
    rate = len(arr) / arr[:, 1].astype(np.float64).sum() * 1000.0
    size = arr[:, 0].astype(np.float64).mean()
    print(f"wrote {args.out}: {arr.shape[0]} requests, {rate:.3f} req/s, mean size {size:.1f} ms, "
          f"offered load (N=10) {1.9 * rate * size / 1e4:.3f}, "
          f"sha256 {hashlib.sha256(args.out.read_bytes()).hexdigest()}")


if __name__ == "__main__":
    main()
