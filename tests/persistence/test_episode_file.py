"""Episode rows held columnar (EpisodeRows) and episodes.csv written append-only with a resumable marker
(EpisodeFile): exact round trips, appends that write only the new rows, resumes that cut what a stopped process
appended, and one-line refusals of a file that no longer matches its checkpoint."""

import csv
import io
import math
import os
import pickle

import numpy as np
import pytest

from lcpo.online.episodes import EpisodeRows
from lcpo.persistence.checkpoint import CheckpointError
from lcpo.persistence.episode_file import EpisodeFile
from lcpo.persistence.runlog import lifelong_return, scored_episodes

# values that a float round trip gets wrong if any step is inexact: -0.0, the smallest subnormal, 0.1 + 0.2,
# a float just below 2**53, the largest double; and integer columns up to 2**53
AWKWARD = [(0, 1, -0.0, 1, 5e-324, 0.1 + 0.2), (1, 2**53, 9007199254740991.0, 2**53 - 1, 1.7976931348623157e308,
                                               -1e-300), (2, 2**53, -123.456789012345678, 7, math.pi, -math.e)]


def _bits(rows):
    return [tuple(np.float64(v).view(np.int64) if isinstance(v, float) else v for v in r) for r in rows]


def test_rows_read_back_as_the_tuples_appended_with_their_types():
    rows = EpisodeRows()
    rows.extend(AWKWARD)
    assert len(rows) == 3 and rows.width == 6
    assert _bits(list(rows)) == _bits(AWKWARD)
    assert [tuple(type(v) for v in r) for r in rows] == [(int, int, float, int, float, float)] * 3
    assert rows[-1] == AWKWARD[-1] and rows[1:] == AWKWARD[1:] and rows == AWKWARD and rows != AWKWARD[:2]
    assert np.asarray(rows).shape == (3, 6) and np.asarray(rows).dtype == np.float64
    np.testing.assert_array_equal(rows.returns, [r[2] for r in AWKWARD])
    assert EpisodeRows(np.asarray(rows)) == rows  # from a checkpoint's array
    assert rows.tolist() == AWKWARD and isinstance(rows.tolist(), list)
    assert pickle.loads(pickle.dumps(rows)) == rows
    with pytest.raises(IndexError, match="episode row 3 out of range"):
        rows[3]


def test_growth_keeps_every_row_and_earlier_views():
    rows = EpisodeRows()
    view = None
    for i in range(5000):  # several doublings of the 1024-row start
        rows.append((i, 3 * i, i / 7, i % 5))
        if i == 10:
            view = rows.array()
    assert view.shape == (11, 4) and not view.flags.writeable
    np.testing.assert_array_equal(np.asarray(rows)[:, 2], np.arange(5000) / 7)
    assert rows[4321] == (4321, 12963, 4321 / 7, 1)


def test_rows_of_episodes_without_context_are_padded_and_a_wider_row_widens_the_table():
    """An environment may report a context in some episodes only (an episode that saw none has no means)."""
    rows = EpisodeRows([(0, 10, 1.0, 10)])
    rows.append((1, 20, 2.0, 10, 0.5))
    rows.append((2, 30, 3.0, 10))
    got = np.asarray(rows)
    assert got.shape == (3, 5) and np.isnan(got[[0, 2], 4]).all() and got[1, 4] == 0.5
    with pytest.raises(ValueError, match="at least 4 values"):
        EpisodeRows([(0, 1, 2.0)])


def test_a_wider_row_that_also_fills_the_capacity_pads_every_earlier_row():
    """Growth leaves the spare capacity unwritten (np.empty): every row read must still be a written one."""
    rows = EpisodeRows()
    for i in range(1024):  # exactly the first capacity: the next append doubles and widens at once
        rows.append((i, i, float(i), 1))
    rows.append((1024, 1024, 1024.0, 1, 0.25, -0.5))
    for i in range(1025, 3000):  # narrower rows after it, through another doubling
        rows.append((i, i, float(i), 1))
    got = np.asarray(rows)
    assert got.shape == (3000, 6)
    assert np.isnan(got[:1024, 4:]).all() and np.isnan(got[1025:, 4:]).all()
    np.testing.assert_array_equal(got[1024], [1024, 1024, 1024.0, 1, 0.25, -0.5])
    np.testing.assert_array_equal(got[:, 2], np.arange(3000.0))


def test_pickle_holds_the_rows_only_not_the_spare_capacity():
    grown = EpisodeRows()
    for i in range(1025):  # capacity 2048 after this
        grown.append((i, 2 * i, i / 3, 2, 0.5))
    exact = EpisodeRows(grown.array())  # the same rows in an array of exactly 1,025
    assert pickle.dumps(grown) == pickle.dumps(exact)  # no unwritten (arbitrary) bytes in the pickle
    back = pickle.loads(pickle.dumps(grown))
    assert back == grown and len(back) == 1025
    assert len(pickle.dumps(grown)) < 1025 * 5 * 8 + 1000
    assert pickle.loads(pickle.dumps(EpisodeRows())) == [] and pickle.loads(pickle.dumps(EpisodeRows())).width is None


class _TaggedRows(EpisodeRows):
    __slots__ = ("tag",)


def test_a_subclass_keeps_its_type_and_fields_through_pickle_and_copies_and_nan_rows_compare_equal():
    import copy

    Tagged = _TaggedRows
    rows = Tagged()
    rows.tag = "run-7"
    rows.append((0, 10, 1.0, 10))
    rows.append((1, 20, 2.0, 10, 0.5))  # the first row's context column is NaN
    for back in (pickle.loads(pickle.dumps(rows)), copy.copy(rows), copy.deepcopy(rows)):
        assert type(back) is Tagged and back.tag == "run-7" and back == rows and len(back) == 2
        back.append((2, 30, 3.0, 10, 0.25))
        assert len(rows) == 2  # independent
    assert rows == rows.copy()  # NaN cells compare equal (they are the same padding)


@pytest.mark.parametrize("row, what", [
    ((0, 2**53 + 1, 1.0, 3), "end step must be an integer within"),  # float64 would round it to 2**53
    ((0, -(2**53) - 1, 1.0, 3), "end step must be an integer within"),
    ((0.0, 1, 1.0, 3), "episode must be an integer"),
    ((0, 1, 1.0, 3.0), "length must be an integer"),
    ((0, 1, 1.0, True), "length must be an integer"),
    ((0, 1, None, 3), "return must be a number, got None"),  # would be stored as NaN
    ((0, 1, 1.0, 3, 0.5, None), "context mean 1 must be a number, got None"),
    ((0, 1, "1.0", 3), "return must be a number"),
])
def test_append_refuses_values_float64_would_change(row, what):
    rows = EpisodeRows([(0, 1, 0.5, 1)])
    with pytest.raises(ValueError, match=what):
        rows.append(row)
    assert len(rows) == 1 and rows.width == 4  # nothing half-added
    rows.append((1, 2**53, np.float32(2.5), np.int64(3), np.float64(0.25)))  # NumPy scalars are numbers
    assert rows[1] == (1, 2**53, 2.5, 3, 0.25)


def test_rows_are_append_only():
    rows = EpisodeRows(AWKWARD)
    with pytest.raises(TypeError):
        rows[0] = AWKWARD[1]
    with pytest.raises(TypeError):
        del rows[0]
    for op in ("pop", "clear", "sort", "remove", "insert"):
        assert not hasattr(rows, op)
    with pytest.raises(TypeError):
        rows * 2
    listed = rows.tolist()
    listed.pop()
    assert len(rows) == 3 and len(listed) == 2


def test_indexing_follows_a_list():
    rows = EpisodeRows(AWKWARD)
    for bad in (1.5, "0"):
        with pytest.raises(TypeError):
            rows[bad]
    with pytest.raises(IndexError, match="episode row -4 out of range"):
        rows[-4]
    assert rows + [(9,)] == AWKWARD + [(9,)] and [(9,)] + rows == [(9,)] + AWKWARD
    c = rows.copy()
    c.append(AWKWARD[0])
    assert len(rows) == 3 and len(c) == 4 and "(0, 1, -0.0, 1" in repr(rows)


def test_lifelong_return_and_scored_count_agree_with_the_list_form():
    rng = np.random.default_rng(0)
    tuples = [(i, 10 * (i + 1), float(rng.normal()), 10) for i in range(1000)]
    rows = EpisodeRows(tuples)
    for warmup in (0, 5000, 10_000):
        a, b = lifelong_return(rows, warmup), lifelong_return(tuples, warmup)
        assert (math.isnan(a) and math.isnan(b)) or a == b  # bit for bit: the same NumPy mean
        assert scored_episodes(rows, warmup) == scored_episodes(tuples, warmup)
    assert scored_episodes(rows, 5000) == 500


def _one_shot(rows, names=("wind_x", "wind_y")):
    """episodes.csv as the whole-table writer of earlier versions produced it."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    width = max(len(r) for r in rows)
    w.writerow(["episode", "step", "return", "length"] + [f"context_mean_{n}" for n in names][: width - 4])
    w.writerows(rows)
    return buf.getvalue().encode()


def test_appends_write_only_new_rows_and_the_file_equals_a_one_shot_write(tmp_path, monkeypatch):
    path = tmp_path / "episodes.csv"
    f = EpisodeFile(path, ("wind_x", "wind_y"))
    rows = EpisodeRows()
    f.write(rows)  # before any row: a 4-column header, rewritten by the first row
    assert path.read_text() == "episode,step,return,length\n"
    assert f.marker()["rows"] == 0
    rows.extend(AWKWARD[:2])
    f.write(rows)
    inode = os.stat(path).st_ino
    written = []
    real_pwrite = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, data, at: (written.append((bytes(data), at)),
                                                            real_pwrite(fd, data, at))[1])
    size = path.stat().st_size
    rows.append(AWKWARD[2])
    f.write(rows)
    f.write(rows)  # nothing new: nothing written
    monkeypatch.undo()
    assert os.stat(path).st_ino == inode  # appended in place, not rewritten
    assert written == [(_one_shot([AWKWARD[2]]).split(b"\n", 1)[1], size)]  # only the new row's line, at the end
    assert path.read_bytes() == _one_shot(AWKWARD)
    m = f.marker()
    assert m["rows"] == 3 and m["bytes"] == path.stat().st_size
    import hashlib

    assert m["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_restore_reads_back_the_marked_rows_and_the_next_write_cuts_what_followed(tmp_path):
    path = tmp_path / "episodes.csv"
    f = EpisodeFile(path, ("wind_x", "wind_y"))
    rows = EpisodeRows(AWKWARD[:2])
    f.write(rows)
    marker = f.marker()
    rows.append(AWKWARD[2])
    f.write(rows)
    with open(path, "ab") as h:
        h.write(b"3,99,1.5,2,0.")  # a line cut short by a kill
    g = EpisodeFile(path, ("wind_x", "wind_y"))
    before = path.read_bytes()
    back = g.restore(marker)
    assert path.read_bytes() == before  # restore writes nothing
    assert _bits(list(back)) == _bits(AWKWARD[:2])
    back.append(AWKWARD[2])
    g.write(back)
    assert path.read_bytes() == _one_shot(AWKWARD)
    assert g.marker() == f.marker()  # the same bytes, the same running hash


def test_restore_of_zero_rows_rewrites_the_file_at_the_next_write(tmp_path):
    path = tmp_path / "episodes.csv"
    path.write_text("episode,step,return,length\n0,1,2.0,3\n")  # rows of a process stopped before a checkpoint
    f = EpisodeFile(path)
    assert len(f.restore({"rows": 0, "bytes": 0, "sha256": "0" * 64})) == 0
    f.write(EpisodeRows([(0, 5, -1.0, 5)]))
    assert path.read_text() == "episode,step,return,length\n0,5,-1.0,5\n"


@pytest.mark.parametrize("damage", ["missing", "cut short", "a changed byte", "malformed marker", "wrong count"])
def test_a_file_that_no_longer_matches_its_checkpoint_is_refused_naming_it(tmp_path, damage):
    path = tmp_path / "episodes.csv"
    f = EpisodeFile(path)
    f.write(EpisodeRows([(0, 10, 1.25, 10), (1, 20, 2.5, 10)]))
    marker = f.marker()
    if damage == "missing":
        path.unlink()
    elif damage == "cut short":
        path.write_bytes(path.read_bytes()[:-3])
    elif damage == "a changed byte":
        path.write_bytes(path.read_bytes().replace(b"1.25", b"1.35"))
    elif damage == "malformed marker":
        marker = {"rows": "two"}
    else:
        marker = {**marker, "rows": 3}
    before = path.read_bytes() if path.exists() else None
    with pytest.raises(CheckpointError) as exc:
        EpisodeFile(path).restore(marker)
    msg = str(exc.value)
    assert str(path) in msg and "\n" not in msg
    assert (path.read_bytes() if path.exists() else None) == before


def test_a_file_replaced_under_a_running_log_is_rewritten_whole(tmp_path):
    path = tmp_path / "episodes.csv"
    f = EpisodeFile(path)
    rows = EpisodeRows([(0, 10, 1.25, 10)])
    f.write(rows)
    path.unlink()
    path.write_text("something else entirely, and longer than the table\n")
    rows.append((1, 20, 2.5, 10))
    f.write(rows)
    assert path.read_text() == "episode,step,return,length\n0,10,1.25,10\n1,20,2.5,10\n"


def test_a_context_name_with_a_comma_or_quote_round_trips(tmp_path):
    path = tmp_path / "episodes.csv"
    f = EpisodeFile(path, ('gravity,z', 'say "hi"'))
    rows = EpisodeRows([(0, 10, 1.25, 10, 9.8, 1.0)])
    f.write(rows)
    assert path.read_text().splitlines()[0] == 'episode,step,return,length,"context_mean_gravity,z","context_mean_say ""hi"""'
    assert EpisodeFile(path, ('gravity,z', 'say "hi"')).restore(f.marker()) == rows


def test_a_hard_linked_copy_is_not_changed_by_later_writes(tmp_path):
    path, copy = tmp_path / "episodes.csv", tmp_path / "backup.csv"
    f = EpisodeFile(path)
    rows = EpisodeRows([(0, 10, 1.25, 10)])
    f.write(rows)
    os.link(path, copy)
    before = copy.read_bytes()
    rows.append((1, 20, 2.5, 10))
    f.write(rows)
    assert copy.read_bytes() == before and path.read_text().count("\n") == 3
    rows.append((2, 30, 2.5, 10))
    f.write(rows)  # no longer linked: appended in place again
    assert path.read_text().count("\n") == 4


@pytest.mark.parametrize("marker", [{"rows": 2.9, "bytes": 10, "sha256": "0" * 64},
                                    {"rows": "2", "bytes": 10, "sha256": "0" * 64},
                                    {"rows": 2, "bytes": float("inf"), "sha256": "0" * 64},
                                    {"rows": True, "bytes": 10, "sha256": "0" * 64},
                                    {"rows": 2, "bytes": 10, "sha256": "short"}, ["rows"]])
def test_malformed_markers_are_refused(tmp_path, marker):
    path = tmp_path / "episodes.csv"
    EpisodeFile(path).write(EpisodeRows([(0, 10, 1.25, 10), (1, 20, 2.5, 10)]))
    with pytest.raises(CheckpointError, match="marker is malformed"):
        EpisodeFile(path).restore(marker)


def test_a_marker_inside_a_line_is_refused(tmp_path):
    import hashlib

    path = tmp_path / "episodes.csv"
    EpisodeFile(path).write(EpisodeRows([(0, 10, 1.25, 10), (1, 20, 2.5, 10)]))
    cut = path.read_bytes()[:-3]  # "...,2.5,1" of the last line
    marker = {"rows": 2, "bytes": len(cut), "sha256": hashlib.sha256(cut).hexdigest(), "width": 4}
    with pytest.raises(CheckpointError, match="differ from those the checkpoint recorded"):
        EpisodeFile(path).restore(marker)


def test_a_file_widened_after_its_checkpoint_resumes_at_the_checkpoints_width(tmp_path):
    """A row wider than the table rewrote the file after the checkpoint, and the process stopped before the next:
    the resume takes the checkpoint's rows back from the wider file, and the next write narrows it again."""
    path = tmp_path / "episodes.csv"
    f = EpisodeFile(path, ("g",))
    rows = EpisodeRows([(0, 10, 1.25, 10), (1, 20, 2.5, 10)])
    f.write(rows)
    marker = f.marker()
    narrow = path.read_bytes()
    rows.append((2, 30, 3.0, 10, 9.8))
    f.write(rows)
    assert path.read_text().splitlines()[0].endswith(",context_mean_g")
    g = EpisodeFile(path, ("g",))
    back = g.restore(marker)
    assert back == [(0, 10, 1.25, 10), (1, 20, 2.5, 10)] and back.width == 4
    g.write(back)
    assert path.read_bytes() == narrow
    path.write_text(path.read_text().replace("2.5", "2.6"))  # changed, not widened: refused
    with pytest.raises(CheckpointError, match="SHA-256"):
        EpisodeFile(path, ("g",)).restore({**marker, "sha256": "0" * 64})


def test_a_marker_without_a_width_from_aa38a09_still_restores(tmp_path):
    path = tmp_path / "episodes.csv"
    f = EpisodeFile(path)
    rows = EpisodeRows([(0, 10, 1.25, 10), (1, 20, 2.5, 10)])
    f.write(rows)
    marker = {k: v for k, v in f.marker().items() if k != "width"}
    assert EpisodeFile(path).restore(marker) == rows
