"""Every ported ansible-core case run under opsrunner, against ansible-core 2.19's recorded
outcome (expected.json, written by side_by_side.py --record; ansible-core is not needed here).
Where opsrunner differs on purpose (portcases.DELIBERATE) or does not match yet
(portcases.NOT_YET), the case is expected to differ, with the reason; strict, so a case that
starts to match says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ansible_ports.portcases import DELIBERATE, NOT_YET, Case, load_cases, load_expected, run_opsrunner

CASES = load_cases()
EXPECTED = load_expected()


def _param(case: Case) -> object:
    reason = DELIBERATE.get(case.name) or NOT_YET.get(case.name)
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(case, id=case.name, marks=marks)


def test_every_case_has_a_recorded_ansible_outcome() -> None:
    assert len(CASES) >= 80
    assert sorted(c.name for c in CASES if c.name not in EXPECTED) == []
    assert not (set(DELIBERATE) | set(NOT_YET)) - {c.name for c in CASES}


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case_behaves_as_ansible_core(case: Case, tmp_path: Path) -> None:
    assert run_opsrunner(case, tmp_path) == EXPECTED[case.name]
