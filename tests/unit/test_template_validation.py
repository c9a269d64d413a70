"""A template file that cannot render (a syntax error in it or in a file it includes by name, a
missing include) is bad input: found when the playbook loads, by `play` and `check`, at the
template's FILE:LINE with the task's key, exit code 4, before any host is touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.helpers import cli

PLAYBOOK = """
- hosts: localhost
  tasks:
    - name: would touch the host
      shell: touch {sentinel}
    - name: tmpl
      template: {{src: {src}, dest: {dest}}}
"""


def setup(tmp_path: Path, files: dict[str, str], src: str = "main.j2") -> tuple[Path, Path]:
    for name, text in files.items():
        write_yaml(tmp_path / name, text)
    sentinel = tmp_path / "touched"
    pb = write_yaml(tmp_path / "pb.yml", PLAYBOOK.format(sentinel=sentinel, src=src, dest=tmp_path / "out"))
    return pb, sentinel


def errors(tmp_path: Path, command: str, pb: Path) -> tuple[int, list[str]]:
    res = cli(command, str(pb), cwd=tmp_path)
    return res.rc, [ln for ln in res.err.splitlines() if ln.startswith("ERROR:")]


CASES = [
    ("unclosed variable", {"main.j2": "line1\n{{ x }\n"},
     "main.j2:2:1: template syntax error: unexpected '}' (in the template src at TMP/pb.yml:7:18)"),
    ("empty if", {"main.j2": "a\nb\n{% if %}x{% endif %}\n"},
     "main.j2:3:1: template syntax error: Expected an expression, got 'end of statement block'"),
    ("unclosed block", {"main.j2": "{% for p in ports %}\n{{ p }}\n"},
     "main.j2:2:1: template syntax error: Unexpected end of template. Jinja was looking for the following tags: "
     "'endfor' or 'else'."),
    ("unknown filter", {"main.j2": "a\n{{ x | no_such_filter }}\n"},
     "main.j2:2:1: template syntax error: No filter named 'no_such_filter'."),
    ("bad #jinja2: line", {"main.j2": "#jinja2: trim_blocks: Flase\n{{ x }}\n"},
     "main.j2:1:1: template syntax error: '#jinja2:' line: trim_blocks: Flase is not a Python literal"),
    ("line after a #jinja2: line", {"main.j2": "#jinja2: lstrip_blocks: True\nok\n{{ x }\n"},
     "main.j2:3:1: template syntax error: unexpected '}'"),
    ("missing include", {"main.j2": "a\n{% include 'nope.j2' %}\n"},
     "main.j2:2:1: template 'nope.j2' not found (looked in "),
    ("broken include", {"main.j2": "a\n{% include 'part.j2' %}\n", "templates/part.j2": "x\n\n{{ y }\n"},
     "templates/part.j2:3:1: template syntax error: unexpected '}' (in the template src at TMP/pb.yml:7:18)"),
    ("broken import two deep", {"main.j2": "{% import 'm.j2' as m %}\n", "m.j2": "{% include 'part.j2' %}\n",
                                "part.j2": "{% endif %}\n"},
     "part.j2:1:1: template syntax error: Encountered unknown tag 'endif'."),
    ("missing of a list", {"main.j2": "{% include ['a.j2', 'b.j2'] %}\n"},
     "main.j2:1:1: template 'a.j2' or 'b.j2' not found"),
    ("role template", {"roles/web/tasks/main.yml": "- template: {src: app.j2, dest: /nonexistent/x}\n",
                       "roles/web/templates/app.j2": "ok\n{% for %}\n",
                       "main.j2": "fine\n"},
     "roles/web/templates/app.j2:2:1: template syntax error: Expected an expression"),
]


@pytest.mark.parametrize("command", ["play", "check"])
@pytest.mark.parametrize("name,files,expected", CASES, ids=[c[0] for c in CASES])
def test_template_file_problem_is_bad_input(tmp_path: Path, command: str, name: str, files: dict[str, str],
                                            expected: str) -> None:
    pb, sentinel = setup(tmp_path, files)
    if name == "role template":
        pb.write_text(pb.read_text() + "  roles: [web]\n")
    rc, lines = errors(tmp_path, command, pb)
    assert rc == 4, lines
    assert len(lines) == 1 and f"ERROR: {tmp_path}/{expected}".replace("TMP", str(tmp_path)) in lines[0], lines
    assert lines[0].endswith("template.src)"), lines
    assert not sentinel.exists()


def test_every_broken_template_at_once(tmp_path: Path) -> None:
    pb, _ = setup(tmp_path, {"main.j2": "{% include 'gone.j2' %}\n{% import 'bad.j2' as b %}\n{{ x }\n",
                             "bad.j2": "\n{{ }}\n"})
    rc, lines = errors(tmp_path, "check", pb)
    assert rc == 4
    assert [ln.split(":")[1:3] for ln in lines] == [[f" {tmp_path}/main.j2", "3"]], lines  # a syntax error first
    pb.write_text(pb.read_text().replace("main.j2", "ok.j2"))
    write_yaml(tmp_path / "ok.j2", "{% include 'gone.j2' %}\n{% import 'bad.j2' as b %}\n")
    rc, lines = errors(tmp_path, "check", pb)
    assert rc == 4
    assert [ln.split(":")[1:3] for ln in lines] == [[f" {tmp_path}/ok.j2", "1"], [f" {tmp_path}/bad.j2", "2"]], lines


def test_what_only_rendering_knows_is_left_to_run_time(tmp_path: Path) -> None:
    """A name that is an expression, `ignore missing`, a templated src: nothing to refuse at
    load; the includes a host renders are found in templates/ and the template's folder."""
    pb, _ = setup(tmp_path, {
        "main.j2": ("{% include 'gone.j2' ignore missing %}{% include part %}{% include 'inc.j2' %}"
                    "{% if false %}{{ x | rendered_never }}{% endif %}\n"),
        "templates/inc.j2": "from templates/\n", "p.j2": "part\n"})
    pb.write_text(pb.read_text().replace("- hosts: localhost", "- hosts: localhost\n  vars: {part: p.j2}"))
    assert cli("check", str(pb), cwd=tmp_path).rc == 0
    assert cli("play", str(pb), cwd=tmp_path).rc == 0
    assert (tmp_path / "out").read_text() == "partfrom templates/\n"


def test_a_templated_src_known_before_the_run_is_checked_by_preflight(tmp_path: Path) -> None:
    """A `src` rendered from play vars names its file before the run: preflight renders it and
    finds its error at the template's line (exit 4, nothing touched)."""
    pb, sentinel = setup(tmp_path, {"bad.j2": "a\n{{ x }\n"}, src="'{{ name }}.j2'")
    pb.write_text(pb.read_text().replace("- hosts: localhost", "- hosts: localhost\n  vars: {name: bad}"))
    res = cli("play", str(pb), cwd=tmp_path)
    assert res.rc == 4 and not sentinel.exists(), res.out + res.err
    assert f"ERROR: {tmp_path}/bad.j2:2:1: template syntax error: unexpected '}}' (in the template src at " \
           f"{pb}:" in res.err, res.err


def test_a_src_known_only_at_run_time_fails_there_naming_the_template_line(tmp_path: Path) -> None:
    pb, sentinel = setup(tmp_path, {"bad.j2": "a\n{{ x }\n"}, src="'{{ r.stdout }}.j2'")
    pb.write_text(pb.read_text().replace("  tasks:\n", "  tasks:\n    - command: echo bad\n      register: r\n", 1))
    res = cli("play", str(pb), cwd=tmp_path)
    assert res.rc == 2 and sentinel.exists(), res.out + res.err
    assert f"{tmp_path}/bad.j2:2: template syntax error: unexpected '}}' in task 'tmpl'" in res.out, res.out


def test_a_role_s_template_is_looked_for_where_the_run_looks(tmp_path: Path) -> None:
    """A role's template is read from its templates/ (then the role, the playbook's folder), at
    load time as at run time: one only in files/ is not found before the run, where load found
    it and the run then failed the host."""
    role = tmp_path / "roles" / "r1"
    write_yaml(role / "tasks" / "main.yml", f"- template: {{src: t.j2, dest: {tmp_path / 'out.txt'}}}\n")
    (role / "files").mkdir()
    (role / "files" / "t.j2").write_text("x={{ 1 }}\n")
    pb = write_yaml(tmp_path / "pb.yml", "- hosts: localhost\n  roles: [r1]\n")
    res = cli("play", str(pb), cwd=tmp_path)
    assert res.rc == 4, res.out + res.err
    assert f"template src 't.j2' not found (looked in {role / 'templates'}, {role}, {tmp_path})" in res.err
    assert not (tmp_path / "out.txt").exists()
    (role / "templates").mkdir()
    (role / "files" / "t.j2").rename(role / "templates" / "t.j2")
    res = cli("play", str(pb), cwd=tmp_path)
    assert res.rc == 0, res.out + res.err
    assert (tmp_path / "out.txt").read_text() == "x=1\n"


def test_an_undefined_variable_in_a_template_file_is_bad_input_at_its_line(tmp_path: Path) -> None:
    """Preflight renders the file as the run will: a variable nothing defines is exit 4 at the
    template's line, before the task before it changes anything; one the run defines (a
    registered result) or that `default()` covers is no problem."""
    (tmp_path / "u.j2").write_text("a\nb\nc={{ nothere }}\n")
    (tmp_path / "ok.j2").write_text("r={{ r.stdout }}\nd={{ ref | default('d') }}\n")
    touched = tmp_path / "touched"
    pb = write_yaml(tmp_path / "pb.yml", f"""
- hosts: localhost
  vars: {{ref: "{{{{ missing }}}}"}}
  tasks:
    - command: touch {touched}
    - command: echo hi
      register: r
    - template: {{src: ok.j2, dest: {tmp_path / 'ok.out'}}}
    - template: {{src: u.j2, dest: {tmp_path / 'u.out'}}}
""")
    for command in ("check", "play"):
        res = cli(command, str(pb), cwd=tmp_path)
        assert res.rc == 4, res.out + res.err
        assert f"ERROR: {tmp_path / 'u.j2'}:3:1: undefined variable: 'nothere' is undefined (in the template src " \
               f"at {pb}:9:18) (at template.src)" in res.err, res.err
        assert res.err.count("ERROR:") == 1, res.err
    assert not touched.exists()
    (tmp_path / "u.j2").write_text("fine\n")
    res = cli("play", str(pb), cwd=tmp_path)
    assert res.rc == 0, res.out + res.err
    assert (tmp_path / "ok.out").read_text() == "r=hi\nd=d\n"
