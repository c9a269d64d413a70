"""copy (and template) read `src` as one file: a directory there is refused before any host
is touched (exit 4, at `src`), written as it is or rendered from vars; a src known only at run
time fails that task, before it writes anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.helpers import cli


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize("module,src,origin", [
    ("copy", "conf", ""),
    ("copy", "{{ where }}", " (from {{ where }})"),
    ("template", "conf", ""),
], ids=["copy", "copy-templated", "template"])
def test_a_directory_src_is_refused_before_any_host_is_touched(tmp_path: Path, module: str, src: str,
                                                               origin: str) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "a.txt").write_text("a\n")
    marker, dest = tmp_path / "first-task-ran", tmp_path / "out"
    pb = write_yaml(tmp_path / "pb.yml", f"""
- hosts: localhost
  vars: {{where: conf}}
  tasks:
    - shell: touch {marker}
    - {module}:
        src: "{src}"
        dest: {dest}/
""")
    for command in ("play", "check"):
        res = cli(command, str(pb), cwd=tmp_path)
        assert res.rc == 4, res.out + res.err
        problem = (f"{module} src 'conf' is a directory ({tmp_path / 'conf'}): {module} reads one file "
                   f"(deploy_code copies a directory){origin}")
        used_at = f"{pb}:{_line_of(pb, 'src:')}:9"
        # A value from one variable is told where the variable was set, then where it is used.
        told = (f"{pb}:{_line_of(pb, 'vars:')}:10: {problem}; used by {module}.src at {used_at} (at where)" if origin
                else f"{used_at}: {problem} (at {module}.src)")
        assert res.err == f"ERROR: {told}\n1 error(s); nothing was run.\n"
        assert not marker.exists() and not dest.exists()


def test_a_directory_src_known_only_at_run_time_fails_its_task_and_a_file_is_copied(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "a.txt").write_text("a\n")
    dest = tmp_path / "out"
    dest.mkdir()
    pb = write_yaml(tmp_path / "pb.yml", f"""
- hosts: localhost
  tasks:
    - shell: echo conf
      register: out
    - copy:
        src: "{{{{ out.stdout }}}}/a.txt"
        dest: {dest}/
    - copy:
        src: "{{{{ out.stdout }}}}"
        dest: {dest}/again/
""")
    res = cli("play", str(pb), cwd=tmp_path)
    assert res.rc == 2, res.out + res.err
    assert (dest / "a.txt").read_text() == "a\n"  # a file: copied
    assert f"copy src 'conf' is a directory ({tmp_path / 'conf'}): copy reads one file (deploy_code copies " \
           "a directory) (from {{ out.stdout }}) (at copy.src)" in res.out
    assert not (dest / "again").exists()
