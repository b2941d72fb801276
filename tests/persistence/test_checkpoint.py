"""Checkpoint files: verified pairs, the atomic run checkpoint (crash at every file operation), refusals."""

import io
import json
import os
import pickle

import numpy as np
import pytest
import torch

from faults import Crash, FileFaults
from lcpo.persistence.checkpoint import CheckpointError, RunCheckpoints, load_state, save_state


def _state(k: float) -> dict:
    """A state with tensors, arrays of two dtypes, int-keyed dicts and JSON values, all functions of k."""
    return {"w": torch.full((3, 2), k), "a": np.arange(5, dtype=np.int16) * int(k), "rng": {"s": [1, 2, int(k)]},
            "opt": {0: {"m": torch.ones(2) * k}}, "k": k}


def _same(a: dict, b: dict) -> bool:
    return (torch.equal(a["w"], b["w"]) and np.array_equal(a["a"], b["a"]) and a["a"].dtype == b["a"].dtype
            and a["rng"] == b["rng"] and torch.equal(a["opt"][0]["m"], b["opt"][0]["m"]) and a["k"] == b["k"])


def test_pair_round_trip_keeps_types(tmp_path):
    save_state(tmp_path / "s", _state(2.0), generation=7)
    back = load_state(tmp_path / "s", generation=7)
    assert _same(back, _state(2.0)) and isinstance(back["a"], np.ndarray) and 0 in back["opt"]


def test_pair_from_two_saves_is_refused_naming_the_file(tmp_path):
    """state.pt of one save with state.json of another: the mix the old two-file checkpoint allowed."""
    save_state(tmp_path / "old", _state(1.0))
    save_state(tmp_path / "new", _state(2.0))
    os.replace(tmp_path / "new.pt", tmp_path / "old.pt")
    with pytest.raises(CheckpointError, match=r"old\.pt does not match old\.json"):
        load_state(tmp_path / "old")


def test_pair_of_the_wrong_generation_is_refused(tmp_path):
    save_state(tmp_path / "s", _state(1.0), generation=400)
    with pytest.raises(CheckpointError, match="generation 400, expected 800"):
        load_state(tmp_path / "s", generation=800)


@pytest.mark.parametrize("cut", [0, 10, 0.5, -3])
def test_truncated_pt_is_refused_naming_it(tmp_path, cut):
    save_state(tmp_path / "s", _state(1.0))
    pt = tmp_path / "s.pt"
    data = pt.read_bytes()
    pt.write_bytes(data[: int(len(data) * cut) if isinstance(cut, float) else cut])
    with pytest.raises(CheckpointError, match=str(pt)):
        load_state(tmp_path / "s")


def test_truncated_json_is_refused_naming_it(tmp_path):
    save_state(tmp_path / "s", _state(1.0))
    js = tmp_path / "s.json"
    js.write_text(js.read_text()[:40])
    with pytest.raises(CheckpointError, match=f"{js}.*truncated or corrupt"):
        load_state(tmp_path / "s")


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("kind", ["plain-pickle", "torch-save"])
def test_crafted_pickle_is_refused_and_never_runs(tmp_path, kind):
    """A .pt whose pickle would run code, with the .json's hash and size updated to match (an attacker can
    rewrite both): weights_only loading refuses it, and the code never runs."""
    marker = tmp_path / "PWNED"
    if kind == "plain-pickle":
        payload = pickle.dumps(_Evil(marker))
    else:
        buf = io.BytesIO()
        torch.save({"t0": _Evil(marker)}, buf)
        payload = buf.getvalue()
    save_state(tmp_path / "s", _state(1.0))
    (tmp_path / "s.pt").write_bytes(payload)
    doc = json.loads((tmp_path / "s.json").read_text())
    import hashlib

    doc["__checkpoint__"].update(pt_sha256=hashlib.sha256(payload).hexdigest(), pt_bytes=len(payload))
    (tmp_path / "s.json").write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match=f"refused to load {tmp_path / 's.pt'}.*not a plain tensor file"):
        load_state(tmp_path / "s")
    assert not marker.exists()


def test_legacy_pair_without_header_still_loads(tmp_path):
    """Folders saved before pairs were verified (agent.save of older versions) keep loading."""
    from lcpo.persistence.checkpoint import _split

    tensors = {}
    skeleton = _split(_state(3.0), tensors, "state")
    torch.save(tensors, tmp_path / "s.pt")
    (tmp_path / "s.json").write_text(json.dumps(skeleton))
    assert _same(load_state(tmp_path / "s"), _state(3.0))


def test_store_commit_replaces_and_cleans(tmp_path):
    store = RunCheckpoints(tmp_path / "checkpoint")
    assert store.latest() is None
    store.commit(400, _state(4.0), config={"steps": 1})
    store.commit(800, _state(8.0), config={"steps": 1})
    step, state = store.load()
    assert step == 800 and _same(state, _state(8.0))
    gens = [p.name for p in store.folder.iterdir() if p.name != "latest.json"]
    assert len(gens) == 1 and gens[0].startswith("step-000000000800-")  # the previous generation is gone


def _write_count(monkeypatch, tmp_path) -> int:
    store = RunCheckpoints(tmp_path / "count")
    store.commit(400, _state(4.0), config={})
    faults = FileFaults(monkeypatch)
    faults.arm()
    store.commit(800, _state(8.0), config={})
    faults.disarm()
    return faults.count


def test_a_crash_before_any_file_operation_of_a_commit_leaves_old_or_new(tmp_path, monkeypatch):
    """Crash before file operation k of the step-800 commit, for every k: the committed checkpoint is the
    complete step-400 one or the complete step-800 one; once the pointer moved it is always the new one; the
    next commit works and clears the leftovers."""
    n = _write_count(monkeypatch, tmp_path)
    assert n >= 12  # mkdir, two files x (create, fsync, chmod, replace, fsync folder), rename, pointer, deletes
    seen = []
    for k in range(1, n + 1):
        store = RunCheckpoints(tmp_path / f"k{k}" / "checkpoint")
        store.commit(400, _state(4.0), config={})
        faults = FileFaults(monkeypatch, crash_at=k)
        faults.arm()
        with pytest.raises(Crash):
            store.commit(800, _state(8.0), config={})
        faults.disarm()
        monkeypatch.undo()
        step, state = store.load()
        assert (step, state["k"]) in ((400, 4.0), (800, 8.0)), k
        assert _same(state, _state(state["k"]))
        seen.append(step)
        store.commit(1200, _state(12.0), config={})
        assert store.load()[0] == 1200
        assert sorted(p.name[:17] for p in store.folder.iterdir()) == ["latest.json", "step-000000001200"]
    assert seen[0] == 400 and seen[-1] == 800 and seen == sorted(seen)  # one switch: the commit point


@pytest.mark.parametrize("damage", ["pointer", "state.json", "state.pt", "folder"])
def test_store_refuses_a_damaged_checkpoint_naming_the_file(tmp_path, damage):
    store = RunCheckpoints(tmp_path / "checkpoint")
    store.commit(400, _state(4.0), config={})
    gen = store.latest().folder
    if damage == "pointer":
        store.pointer.write_text(store.pointer.read_text()[:30])
        target = store.pointer
    elif damage == "folder":
        import shutil

        shutil.rmtree(gen)
        target = gen
    else:
        target = gen / damage
        data = target.read_bytes()
        target.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=str(target)):
        store.load()


def test_generation_folder_from_another_commit_is_refused(tmp_path):
    """A pointer naming a folder whose state.json is not the one it recorded (e.g. copied over) is refused."""
    a, b = RunCheckpoints(tmp_path / "a"), RunCheckpoints(tmp_path / "b")
    a.commit(400, _state(4.0), config={})
    b.commit(400, _state(5.0), config={})
    ga, gb = a.latest().folder, b.latest().folder
    os.replace(gb / "state.json", ga / "state.json")
    with pytest.raises(CheckpointError, match=f"{ga / 'state.json'} does not match"):
        a.load()


def test_a_refused_save_leaves_the_existing_pair_loadable(tmp_path):
    """A value JSON refuses (numpy complex) is found before either file is written: the pair saved before still
    loads (it used to have its .pt replaced first, leaving a pair that no longer matched)."""
    save_state(tmp_path / "s", _state(4.0), generation=4)
    with pytest.raises(TypeError):
        save_state(tmp_path / "s", {"x": np.complex128(1 + 2j)}, generation=5)
    assert _same(load_state(tmp_path / "s", generation=4), _state(4.0))


@pytest.mark.parametrize("step, state, config, error", [
    (800, {"x": np.array([object()])}, {}, TypeError),  # an object array: save_state refuses it
    (2**63, _state(8.0), {}, ValueError),  # beyond int64
    (800, _state(8.0), {"tags": {1, 2}}, TypeError),  # a config the pointer cannot hold
])
def test_a_refused_commit_leaves_no_folder_and_the_last_checkpoint(tmp_path, step, state, config, error):
    store = RunCheckpoints(tmp_path / "checkpoint")
    store.commit(400, _state(4.0), config={"steps": 1})
    names = sorted(p.name for p in store.folder.iterdir())
    with pytest.raises(error) as info:
        store.commit(step, state, config=config)
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in store.folder.iterdir()) == names
    loaded_step, loaded = store.load()
    assert loaded_step == 400 and _same(loaded, _state(4.0))
