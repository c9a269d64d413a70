"""job_environment(): opsrunner's own venv is left out of a local host's environment, nothing
else: a VIRTUAL_ENV or PYTHONHOME of another venv, and every other PATH entry, stay."""

from __future__ import annotations

from opsrunner.connections.local import job_environment


def test_only_opsrunners_own_venv_is_left_out() -> None:
    ours = {"VIRTUAL_ENV": "/opt/ops/.venv", "VIRTUAL_ENV_PROMPT": "(.venv) ", "PYTHONHOME": "/opt/ops/.venv",
            "PATH": "/opt/ops/.venv/bin:/home/u/bin:/usr/bin", "HF_HOME": "/data/hf"}
    assert job_environment(ours, "/opt/ops/.venv", "/usr") == {"PATH": "/home/u/bin:/usr/bin", "HF_HOME": "/data/hf"}
    theirs = {"VIRTUAL_ENV": "/home/u/torch-venv", "PYTHONHOME": "/home/u/py",
              "PATH": "/home/u/torch-venv/bin:/opt/ops/.venv/bin:/usr/bin"}
    assert job_environment(theirs, "/opt/ops/.venv", "/usr") == {**theirs, "PATH": "/home/u/torch-venv/bin:/usr/bin"}
    assert job_environment(ours, "/usr", "/usr") is None  # not in a venv: inherited as is
