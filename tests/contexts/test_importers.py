"""Raw data to traces: NDBC files (hand-made, with gaps and missing codes; the real 46002 file) and CSV tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lcpo.cli import traces as cli
from lcpo.contexts import TraceError, load_trace, resolve_trace
from lcpo.contexts.importers import import_csv, import_ndbc, ndbc_records, resample

NDBC_SOURCE = Path("/work/shared/data/ndbc_46002_cwind_2016/46002c2016.txt")

# Eight hourly records; four have a missing wind value (and so are dropped): 02:00 both (999 / 99.0), 04:00 the
# speed (99.0), 05:00 the direction as a realtime file writes it (MM), 06:00 the direction (999). The other
# columns carry their own missing codes (99.00, 999, 9999), which must not matter. The four used records:
#   00:00 from  90 deg at 5.0 m/s -> blows west:  u = -5,   v =  0
#   01:00 from 180 deg at 2.5 m/s -> blows north: u =  0,   v = 2.5
#   03:00 from 270 deg at 5.0 m/s -> blows east:  u =  5,   v =  0
#   07:00 from 360 deg at 2.5 m/s -> blows south: u =  0,   v = -2.5
# max(|u|, |v|) = 5, so the scale is 4 / 5 = 0.8: (-4, 0), (0, 2), (4, 0), (0, -2) at 0, 60, 180, 420 minutes.
_ROWS = [("00", "90", "5.0"), ("01", "180", "2.5"), ("02", "999", "99.0"), ("03", "270", "5.0"),
         ("04", "0", "99.0"), ("05", "MM", "4.0"), ("06", "999", "3.0"), ("07", "360", "2.5")]
STDMET = ("#YY  MM DD hh mm WDIR WSPD GST  WVHT   DPD   APD MWD   PRES  ATMP  WTMP  DEWP  VIS  TIDE\n"
          "#yr  mo dy hr mn degT m/s  m/s     m   sec   sec degT   hPa  degC  degC  degC   mi    ft\n"
          + "".join(f"2020 01 01 {hh} 00 {d:>4} {s:>4} 99.0 99.00 99.00 99.00 999 1015.0  10.0 999.0 999.0 99.0 "
                    "99.00\n" for hh, d, s in _ROWS))
CWIND = ("#YY  MM DD hh mm WDIR WSPD GDR GST GTIME\n#yr  mo dy hr mn degT m/s degT m/s hhmm\n"
         + "".join(f"2020 01 01 {hh} 00 {d:>4} {s:>4} 999 99.0 9999\n" for hh, d, s in _ROWS))
# Resampled every 30 minutes (0 .. 420 min, 15 steps), linear in time between the used records.
EXPECTED_U = [-4, -2, 0, 1, 2, 3, 4, 3.5, 3, 2.5, 2, 1.5, 1, 0.5, 0]
EXPECTED_V = [0, 1, 2, 1.5, 1, 0.5, 0, -0.25, -0.5, -0.75, -1, -1.25, -1.5, -1.75, -2]


@pytest.fixture(params=["stdmet", "cwind"])
def ndbc_file(request, tmp_path) -> Path:
    path = tmp_path / f"buoy_{request.param}.txt"
    path.write_text(STDMET if request.param == "stdmet" else CWIND)
    return path


def test_ndbc_import_exact_values_gaps_and_report(ndbc_file):
    trace, report = import_ndbc(ndbc_file, step_seconds=1800)
    np.testing.assert_allclose(trace.values[:, 0], EXPECTED_U, rtol=0, atol=1e-9)
    np.testing.assert_allclose(trace.values[:, 1], EXPECTED_V, rtol=0, atol=1e-9)
    assert (report.records, report.missing, report.used) == (8, 4, 4)
    assert report.interval_s == 3600 and report.gaps == 2 and report.longest_gap_s == 4 * 3600
    assert report.duration_s == 7 * 3600 and report.first == "2020-01-01T00:00:00"
    assert report.scale == pytest.approx(0.8, rel=1e-15)
    np.testing.assert_allclose(report.raw_min, [-5, -2.5], atol=1e-12)
    np.testing.assert_allclose(report.raw_max, [5, 2.5], atol=1e-12)
    assert (report.steps, report.step_s) == (15, 1800)
    assert trace.metadata["columns"] == ["wind_x", "wind_y"] and trace.metadata["import"]["gaps"] == 2


def test_ndbc_records_scale_length_and_strictness(ndbc_file):
    records, _ = ndbc_records(ndbc_file)
    np.testing.assert_allclose(records, [[0, -4, 0], [60, 0, 2], [180, 4, 0], [420, 0, -2]], atol=1e-7)
    same_scale, _ = ndbc_records(ndbc_file, scale=0.1)  # another buoy on a given scale (e.g. ndbc-46002's)
    np.testing.assert_allclose(same_scale[:, 1:], records[:, 1:] / 8, atol=1e-7)
    by_length, report = import_ndbc(ndbc_file, length=8)  # 8 steps, 60 minutes apart
    np.testing.assert_allclose(by_length.values[:, 0], [-4, 0, 2, 4, 3, 2, 1, 0], atol=1e-9)
    assert report.step_s == 3600
    with pytest.raises(TraceError, match="record 2"):  # the packaged trace's build refuses missing values
        ndbc_records(ndbc_file, missing="error")
    with pytest.raises(TraceError, match="scale"):
        import_ndbc(ndbc_file, scale=-1)


def test_ndbc_default_step_is_the_bundled_traces_30_s(ndbc_file):
    trace, report = import_ndbc(ndbc_file)
    assert len(trace) == 7 * 120 + 1 and report.step_s == 30
    np.testing.assert_allclose(trace.values[::60, 0], EXPECTED_U, atol=1e-9)


def test_ndbc_bad_files_are_named(tmp_path):
    no_header = tmp_path / "x.txt"
    no_header.write_text("2020 01 01 00 00 90 5.0\n")
    with pytest.raises(TraceError, match="header"):
        import_ndbc(no_header)
    no_speed = tmp_path / "y.txt"
    no_speed.write_text("#YY MM DD hh mm WDIR GST\n2020 01 01 00 00 90 5.0\n")
    with pytest.raises(TraceError, match="wind speed"):
        import_ndbc(no_speed)
    backwards = tmp_path / "z.txt"
    backwards.write_text("#YY MM DD hh mm WDIR WSPD\n2020 01 01 01 00 90 5.0\n2020 01 01 00 00 90 5.0\n")
    with pytest.raises(TraceError, match="strictly increase"):
        import_ndbc(backwards)


def test_resample_rule():
    values, rule = resample(np.array([0.0, 10.0]), np.array([[0.0], [1.0]]), step_minutes=2.5)
    np.testing.assert_array_equal(values[:, 0], [0, 0.25, 0.5, 0.75, 1.0])
    assert "150 s per step" in rule
    with pytest.raises(TraceError, match="exactly one"):
        resample(np.array([0.0, 1.0]), np.ones((2, 1)))


@pytest.mark.skipif(not NDBC_SOURCE.exists(), reason="shared NDBC source file not available")
def test_importing_the_raw_46002_file_gives_the_bundled_trace():
    trace, report = import_ndbc(NDBC_SOURCE)
    np.testing.assert_array_equal(trace.values, resolve_trace("ndbc-46002").values)
    assert (report.records, report.missing, report.gaps, report.longest_gap_s) == (28_468, 0, 52, 130 * 60)
    assert report.interval_s == 600


CSV = ("time,load,temp\n"
       "2024-01-01T00:00:00Z,1.0,10\n"
       "2024-01-01T00:10:00Z,,11\n"       # missing load: the row is dropped
       "2024-01-01T00:20:00Z,3.0,9999\n"  # 9999 = missing temperature (with na_values): dropped
       "2024-01-01T00:30:00Z,4.0,13\n")


def test_csv_import_drops_missing_rows_and_bridges_them(tmp_path):
    path = tmp_path / "load.csv"
    path.write_text(CSV)
    trace, report = import_csv(path, na_values=["9999"])
    np.testing.assert_allclose(trace.values, [[1, 10], [2, 11], [3, 12], [4, 13]], rtol=0, atol=1e-12)
    assert (report.records, report.missing, report.used, report.gaps) == (4, 2, 2, 1)
    assert report.interval_s == 600 and report.step_s == 600 and report.scale == 1
    assert trace.metadata["columns"] == ["load", "temp"]
    only_temp, _ = import_csv(path, columns=["temp"], na_values=["9999"], step_seconds=900)
    np.testing.assert_allclose(only_temp.values[:, 0], [10, 11.5, 13], atol=1e-12)  # 00:10 is now used
    scaled, rep = import_csv(path, na_values=["9999"], scale="auto")
    assert rep.scale == pytest.approx(4 / 13) and np.abs(scaled.values).max() == pytest.approx(4.0)


def test_csv_errors_name_the_row_or_column(tmp_path):
    path = tmp_path / "load.csv"
    path.write_text(CSV.replace(",9999", ",n/a?"))
    with pytest.raises(TraceError, match=r"row 2: column 'temp' holds 'n/a\?', not a number.*na_values"):
        import_csv(path)
    assert import_csv(path, na_values=["n/a?"])[1].missing == 2
    with pytest.raises(TraceError, match="no column 'wind'"):
        import_csv(path, columns=["wind"])
    bad_time = tmp_path / "t.csv"
    bad_time.write_text("t,x\n2024-01-01,1\nyesterday,2\n")
    with pytest.raises(TraceError, match="row 1: timestamp 'yesterday'"):
        import_csv(bad_time)


def test_csv_numeric_time_is_seconds(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("seconds,x\n0,0\n5,1\n10,4\n")
    trace, report = import_csv(path, step_seconds=2.5)
    np.testing.assert_allclose(trace.values[:, 0], [0, 0.5, 1, 2.5, 4], atol=1e-12)
    assert report.duration_s == 10


def test_cli_import_prints_the_report_and_writes_a_usable_trace(ndbc_file, tmp_path, capsys):
    out = tmp_path / "buoy.npy"
    assert cli.main(["import", "ndbc", str(ndbc_file), "--out", str(out), "--step-seconds", "1800"]) == 0
    text = capsys.readouterr().out
    for fragment in ("records   8", "4 with a missing value dropped", "gaps      2 longer than 1 h",
                     "the longest 4 h", "7 h", "scale     x 0.8", "steps     15 of 30 min"):
        assert fragment in text, fragment
    trace = load_trace(out)
    np.testing.assert_allclose(trace.values[:, 0], EXPECTED_U, atol=1e-9)
    side = json.loads(out.with_name(out.name + ".json").read_text())
    assert side["metadata"]["import"]["missing"] == 4
    csv_in = tmp_path / "load.csv"
    csv_in.write_text(CSV)
    assert cli.main(["import", "csv", str(csv_in), "--out", str(tmp_path / "l.csv"), "--na-values", "9999"]) == 0
    assert load_trace(tmp_path / "l.csv").values.shape == (4, 2)
    capsys.readouterr()
    csv_in.write_text(CSV.replace(",9999", ",MM"))
    assert cli.main(["import", "csv", str(csv_in), "--out", str(tmp_path / "m.npy")]) == 2  # MM not declared
    assert "row 2: column 'temp' holds 'MM'" in capsys.readouterr().err


def test_imports_skip_a_byte_order_mark(tmp_path, ndbc_file):
    """Issue 24 item 7: a UTF-8 BOM before an NDBC header or a timestamped CSV's header is skipped."""
    bom = tmp_path / "bom_ndbc.txt"
    bom.write_text("\ufeff" + ndbc_file.read_text(), encoding="utf-8")
    trace, report = import_ndbc(bom, step_seconds=1800)
    np.testing.assert_allclose(trace.values[:, 0], EXPECTED_U, rtol=0, atol=1e-9)
    assert report.used == 4
    csv_file = tmp_path / "bom.csv"
    csv_file.write_text("\ufefftime,wind\n2020-01-01T00:00:00Z,1\n2020-01-01T01:00:00Z,3\n", encoding="utf-8")
    trace, _ = import_csv(csv_file, step_seconds=1800)
    assert trace.metadata["columns"] == ["wind"]
