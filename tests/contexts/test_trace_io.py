"""Round trips and validation errors of lcpo.contexts.io (save_trace / load_trace)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from lcpo.contexts import ContextTrace, TraceError, load_trace, save_trace
from lcpo.contexts.io import sidecar_path


@pytest.fixture
def trace() -> ContextTrace:
    rng = np.random.default_rng(1)
    values = rng.standard_normal((257, 2)) * np.array([1e-9, 1e9])  # extreme scales test the float format
    return ContextTrace(values, "demo", {"columns": ["wind_x", "wind_y"], "seed": 3, "params": {"a": [1, 2]}})


@pytest.mark.parametrize("suffix", [".npy", ".csv"])
def test_round_trip_is_exact_with_metadata(tmp_path, trace, suffix):
    path = save_trace(trace, tmp_path / f"t{suffix}")
    loaded = load_trace(path)
    np.testing.assert_array_equal(loaded.values, trace.values)  # bit-exact, also through CSV text
    assert loaded.name == "demo"
    assert loaded.metadata["seed"] == 3
    assert loaded.metadata["params"] == {"a": [1, 2]}
    assert loaded.metadata["columns"] == ["wind_x", "wind_y"]
    assert loaded.metadata["source"] == str(path)
    assert sidecar_path(path).name == f"t{suffix}.json"


def test_csv_header_uses_columns(tmp_path, trace):
    path = save_trace(trace, tmp_path / "t.csv")
    assert path.read_text().splitlines()[0] == "wind_x,wind_y"
    plain = save_trace(ContextTrace(np.ones((3, 3)), "x"), tmp_path / "p.csv")
    assert plain.read_text().splitlines()[0] == "c0,c1,c2"


def test_load_without_sidecar_or_header(tmp_path):
    path = tmp_path / "raw.csv"
    path.write_text("1, 2\n\n3 ,4.5\n-1e3,0\n")
    loaded = load_trace(path)
    np.testing.assert_array_equal(loaded.values, [[1, 2], [3, 4.5], [-1000, 0]])
    assert loaded.name == "raw"
    assert "columns" not in loaded.metadata
    assert load_trace(path, name="given").name == "given"
    one = tmp_path / "one.csv"
    one.write_text("speed\n1\n2\n")
    assert load_trace(one).values.shape == (2, 1)


def test_integer_npy_is_accepted_as_float(tmp_path):
    path = tmp_path / "i.npy"
    np.save(path, np.arange(6, dtype=np.int32).reshape(3, 2))
    loaded = load_trace(path)
    assert loaded.values.dtype == np.float64
    np.testing.assert_array_equal(loaded.values, [[0, 1], [2, 3], [4, 5]])


def test_save_accepts_array_and_writes_atomically(tmp_path):
    path = save_trace(np.zeros((4, 2)), tmp_path / "a.npy")
    assert load_trace(path).name == "a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "a.npy.json"]  # no temp files left


def test_failed_write_leaves_old_file_and_no_temp(tmp_path, monkeypatch):
    path = save_trace(np.zeros((4, 2)), tmp_path / "a.npy")
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(np, "save", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        save_trace(np.ones((4, 2)), path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "a.npy.json"]


def test_unserialisable_metadata_is_refused_before_writing(tmp_path):
    path = tmp_path / "m.npy"
    with pytest.raises(TraceError, match="JSON") as err:
        save_trace(ContextTrace(np.zeros((2, 1)), "m", {"f": object()}), path)
    assert str(path) in str(err.value)
    assert not path.exists()


def _npy(tmp_path, name, array, allow_pickle=False):
    path = tmp_path / name
    np.save(path, array, allow_pickle=allow_pickle)
    return path


def _text(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("make, problem", [
    (lambda d: _npy(d, "cube.npy", np.zeros((2, 2, 2))), r"wrong shape \(2, 2, 2\)"),
    (lambda d: _npy(d, "flat.npy", np.zeros(5)), r"wrong shape \(5,\).*\(T, 1\)"),
    (lambda d: _npy(d, "empty.npy", np.zeros((0, 2))), r"wrong shape \(0, 2\).*empty"),
    (lambda d: _npy(d, "nocols.npy", np.zeros((3, 0))), r"wrong shape \(3, 0\).*empty"),
    (lambda d: _npy(d, "obj.npy", np.array([[1, None]], dtype=object), True), "wrong dtype.*object"),
    (lambda d: _npy(d, "str.npy", np.array([["a", "b"]])), "wrong dtype <U1"),
    (lambda d: _npy(d, "cplx.npy", np.ones((2, 2), dtype=complex)), "wrong dtype complex128"),
    (lambda d: _npy(d, "bool.npy", np.ones((2, 2), dtype=bool)), "wrong dtype bool"),
    (lambda d: _npy(d, "nan.npy", np.array([[0.0, 1], [2, 3], [4, np.nan]])), "non-finite value nan at row 2, "
                                                                               "column 1"),
    (lambda d: _text(d, "garbage.npy", "not numpy"), "not a valid .npy"),
    (lambda d: _text(d, "inf.csv", "x,y\n1,2\ninf,3\n"), "non-finite value inf at row 1, column 0"),
    (lambda d: _text(d, "ragged.csv", "x,y\n1,2\n3,4\n5,6,7\n"), "ragged rows: line 4 has 3 fields, expected 2"),
    (lambda d: _text(d, "short.csv", "1,2\n3\n"), "ragged rows: line 2 has 1 fields, expected 2"),
    (lambda d: _text(d, "word.csv", "x,y\n1,2\n3,abc\n"), "wrong dtype: line 3, column 2: 'abc'"),
    (lambda d: _text(d, "mixed.csv", "1,abc\n3,4\n"), "wrong dtype: line 1, column 2: 'abc'"),
    (lambda d: _text(d, "cplx.csv", "1+2j,3\n"), "wrong dtype: line 1, column 1: '1\\+2j'"),
    (lambda d: _text(d, "blank.csv", "\n\n"), "empty CSV"),
    (lambda d: _text(d, "head.csv", "x,y\n"), "no data rows after the header"),
    (lambda d: _text(d, "width.csv", "x,y,z\n1,2\n"), "header names 3 columns"),
    (lambda d: d / "missing.npy", "not found"),
    (lambda d: d / "missing.csv", "not found"),
    (lambda d: _text(d, "trace.txt", "1,2\n"), "unknown trace file extension '.txt'"),
])
def test_load_errors_name_file_and_problem(tmp_path, make, problem):
    path = make(tmp_path)
    with pytest.raises(TraceError, match=problem) as err:
        load_trace(path)
    assert str(err.value).startswith(str(path))


def test_bad_sidecar_names_sidecar(tmp_path):
    path = save_trace(np.zeros((2, 2)), tmp_path / "s.npy")
    sidecar_path(path).write_text("{broken")
    with pytest.raises(TraceError, match="sidecar") as err:
        load_trace(path)
    assert str(sidecar_path(path)) in str(err.value)
    sidecar_path(path).write_text(json.dumps({"name": 3}))
    with pytest.raises(TraceError, match="'name' must be a string"):
        load_trace(path)


def test_save_errors(tmp_path):
    with pytest.raises(TraceError, match="unknown trace file extension") as err:
        save_trace(np.zeros((2, 2)), tmp_path / "t.parquet")
    assert str(tmp_path / "t.parquet") in str(err.value)
    with pytest.raises(TraceError, match="does not exist"):
        save_trace(np.zeros((2, 2)), tmp_path / "no" / "t.npy")
    with pytest.raises(TraceError, match="non-finite"):
        save_trace(np.array([[np.inf]]), tmp_path / "t.npy")


def test_saved_file_permissions_are_not_private(tmp_path):
    path = save_trace(np.zeros((2, 2)), tmp_path / "p.npy")
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


BOM = "\ufeff"


def test_csv_with_a_byte_order_mark_and_a_header(tmp_path):
    """Issue 24 item 7: a spreadsheet's UTF-8 BOM is not part of the first column name."""
    path = tmp_path / "bom.csv"
    path.write_text(BOM + "wind_x,wind_y\n1.5,2\n-3,4\n", encoding="utf-8")
    trace = load_trace(path)
    assert trace.metadata["columns"] == ["wind_x", "wind_y"]
    np.testing.assert_array_equal(trace.values, [[1.5, 2.0], [-3.0, 4.0]])


def test_csv_with_a_byte_order_mark_and_no_header(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_text(BOM + "1.5,2\n-3,4\n", encoding="utf-8")
    np.testing.assert_array_equal(load_trace(path).values, [[1.5, 2.0], [-3.0, 4.0]])


def test_sidecar_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("1\n2\n")
    sidecar_path(path).write_text(BOM + json.dumps({"name": "mine", "metadata": {"units": "m/s"}}), encoding="utf-8")
    trace = load_trace(path)
    assert trace.name == "mine" and trace.metadata["units"] == "m/s"


def test_csv_not_utf8_is_named(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes(b"1.5,2\n3,4\n5,6 \xe9\n")
    with pytest.raises(TraceError, match=r"latin.csv: .*not UTF-8"):
        load_trace(path)
