"""The report's OOD detection table (issue 15): anchors found, OOD fraction and the threshold in force."""

import pandas as pd

from lcpo.experiments.report import write_report


def test_report_lists_ood_diagnostics_of_schemes_with_a_detector(tmp_path):
    rows = []
    for scheme, agent, constrained, frac, thr in [("a2c", "a2c", 0.0, None, None),
                                                  ("lcpo[ood_threshold=1.0]", "lcpo", 0.7, 0.35, 1.0),
                                                  ("lcpo[ood_threshold=auto]", "lcpo", 0.9, 0.6, 0.4)]:
        for seed in range(2):
            rows.append({"run_id": f"{scheme}-{seed}", "status": "done", "env": "lcpo/WindyPendulum-v0",
                         "trace": "wind-1", "agent": agent, "seed": seed, "scheme": scheme,
                         "lifelong_return": -100.0 - seed, "steps_done": 1000, "wall_time_s": 1.0, "error": None,
                         "constrained_fraction": constrained, "ood_fraction": 0.0 if frac is None else frac,
                         "diag/ood/fraction": frac, "diag/ood/threshold": None if thr is None else thr + 0.1 * seed})
    md = write_report(pd.DataFrame(rows), pd.DataFrame(columns=["run_id", "episode", "step", "return"]),
                      tmp_path).read_text()
    assert "## OOD detection" in md
    section = md.split("## OOD detection", 1)[1]
    lines = [ln for ln in section.splitlines() if ln.startswith("| lcpo/")]
    assert lines == ["| lcpo/WindyPendulum-v0 | wind-1 | lcpo[ood_threshold=1.0] | 0.70 | 0.35 | 1.05 |",
                     "| lcpo/WindyPendulum-v0 | wind-1 | lcpo[ood_threshold=auto] | 0.90 | 0.60 | 0.45 |"]


def test_report_without_ood_columns_has_no_ood_section(tmp_path):
    runs = pd.DataFrame([{"run_id": "a", "status": "done", "env": "e", "trace": "t", "agent": "a2c", "seed": 0,
                          "scheme": "a2c", "lifelong_return": -1.0, "steps_done": 10, "wall_time_s": 1.0,
                          "error": None}])
    md = write_report(runs, pd.DataFrame(columns=["run_id", "episode", "step", "return"]), tmp_path).read_text()
    assert "OOD detection" not in md


def test_store_keeps_a_threshold_column_of_words_and_numbers(tmp_path):
    """``ood_threshold = ["auto", 0.25, 1.0]`` is one grid axis: the store writes it as one text column (Parquet
    cannot hold a column of strings and floats) and the report's ablation still reads it."""
    from lcpo.experiments.config import expand, parse_config
    from lcpo.experiments.runner import run_sweep
    from lcpo.experiments.store import load_store

    fake = "lcpo_fake_run"
    d = {"name": "t", "steps": 1000, "seeds": 1, "envs": ["lcpo/WindyPendulum-v0"], "traces": ["wind-1"],
         "agents": ["lcpo"], "checkpoint_every": 200, "overrides": {"lcpo": {"ood_threshold": ["auto", 0.25, 1.0]}}}
    run_sweep(expand(parse_config(d, executor=fake), executor=fake), tmp_path, workers=1, executor=fake,
              progress=False)
    runs, episodes = load_store(tmp_path)
    assert (tmp_path / "results.parquet").is_file()
    assert sorted(runs["hp/ood_threshold"]) == ["0.25", "1.0", "auto"]
    assert set(runs["scheme"]) == {"lcpo[ood_threshold=auto]", "lcpo[ood_threshold=0.25]", "lcpo[ood_threshold=1.0]"}
    md = write_report(runs, episodes, tmp_path / "report").read_text()
    assert "ood_threshold" in md
