"""The default target of a hand rollback: the newest release before `current` whose last
verdict is "passed"; one that failed or was never verified is skipped, and with none the
refusal lists each and why."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from opsrunner.remote.rollback import choose_previous

if TYPE_CHECKING:
    from opsrunner.remote.goodrun import Verdict


def _v(state: str, why: str | None = None) -> Verdict:
    return {"state": state, "at": 0.0, "pid": 7, "why": why}


def test_a_failed_or_unverified_release_is_skipped() -> None:
    verdicts = {"a": _v("passed"), "b": _v("failed", "hung"), "c": None, "d": _v("passed")}
    assert choose_previous(["a", "b", "c", "d"], "d", verdicts) == "a"
    assert choose_previous(["a", "b", "c", "d"], "c", verdicts) == "a"
    verdicts["c"] = _v("passed")
    assert choose_previous(["a", "b", "c", "d"], "d", verdicts) == "c"


def test_with_none_that_passed_it_refuses_naming_each() -> None:
    verdicts = {"a": None, "b": _v("failed", "Verify failed: hung: " + "x" * 200), "c": _v("passed")}
    with pytest.raises(ValueError) as refused:
        choose_previous(["a", "b", "c"], "c", verdicts)
    text = str(refused.value)
    assert text.startswith("no release before the current one (c) passed verify, so there is none to go back to "
                           "(b failed at ")
    assert " (pid 7): Verify failed: hung: xxx" in text and "...; a was never verified); nothing was stopped. " \
        "Name the release to go to (release=NAME) to start one anyway" in text
