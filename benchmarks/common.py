"""Output shared by the benchmark scripts: a Markdown table of steps/s and an optional JSON file."""

from __future__ import annotations

import json
import platform


def report(results: dict[str, float], column: str, steps: int, repeats: int, json_path: str | None,
           note: str = "") -> None:
    """Print the machine line and a ``| column | steps/s |`` table; write ``json_path`` if given."""
    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, {note}"
          f"{steps} steps, best of {repeats}\n")
    print(f"| {column} | steps/s |\n|---|---|")
    for name, sps in results.items():
        print(f"| `{name}` | {sps:,.0f} |")
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump({"steps": steps, "repeats": repeats, "steps_per_s": results}, f, indent=2)
