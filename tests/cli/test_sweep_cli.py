"""`lcpo sweep` argument validation."""

from __future__ import annotations

import pytest

from lcpo.cli.sweep import build_parser


@pytest.mark.parametrize("workers", ["0", "-2", "two"])
def test_workers_must_be_a_positive_integer(capsys, workers):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["configs/smoke.toml", "--workers", workers, "--dry-run"])
    assert info.value.code == 2
    assert f"expected a positive integer, got {workers!r}" in capsys.readouterr().err


def test_positive_workers_accepted():
    assert build_parser().parse_args(["c.toml", "--workers", "3"]).workers == 3
