"""The template module writes the bytes ansible-core's template module writes for the same file
and variables, so a host last written by Ansible is `ok`. Every expected value below is what
ansible-core 2.19.14's template module wrote for the same template and vars (connection: local)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.conftest import write_yaml
from tests.helpers import cli, read_events, task_ends

VARS = {"x": "X", "ports": [80, 443], "nothing": None,
        "servers": [{"name": "a", "ssl": True, "locs": ["/", "/api"]}, {"name": "b", "ssl": False, "locs": []}]}

#: name: (template text, what ansible-core wrote)
ANSIBLE_CORE = {
    "for loop": ("[app]\nhost = {{ x }}\n{% for p in ports %}\nport = {{ p }}\n{% endfor %}\n"
                                "# {{ x }} end of the file, to make up the bytes\n",
                                b"[app]\nhost = X\nport = 80\nport = 443\n# X end of the file, to make up the bytes\n"),
    "ends with a newline": ("a={{ x }}\n", b"a=X\n"),
    "ends without one": ("a={{ x }}", b"a=X"),
    "ends with two": ("a={{ x }}\n\n", b"a=X\n\n"),
    "ends with a block tag": ("host\n{% for p in ports %}\nport={{ p }}\n{% endfor %}", b"host\nport=80\nport=443\n"),
    "blank lines after a loop": ("{% for p in ports %}\n{{ p }}\n{% endfor %}\n\n\n", b"80\n443\n\n\n"),
    "nothing rendered": ("{% if false %}x{% endif %}\n", b""),
    "lstrip_blocks off": ("top\n  {% if true %}\n  in\n  {% endif %}\n  end\n", b"top\n    in\n    end\n"),
    "whitespace control": ("a\n  {%- for p in ports -%}\n  {{ p }}\n  {%- endfor -%}\nend\n", b"a80443end\n"),
    "+%} keeps the newline": ("{% if true +%}\nx\n{% endif %}\n", b"\nx\n"),
    "for and if nested": ("{% for s in servers %}\nserver {{ s.name }} {\n{% if s.ssl %}\n  listen 443;\n"
                          "{% else %}\n  listen 80;\n{% endif %}\n{% for l in s.locs %}\n  location {{ l }} {}\n"
                          "{% endfor %}\n}\n{% endfor %}\n",
                          b"server a {\n  listen 443;\n  location / {}\n  location /api {}\n}\n"
                          b"server b {\n  listen 80;\n}\n"),
    "comments": ("a\n{# note #}\nb\n{#- n2 -#}\nc\n", b"a\nbc\n"),
    "none is nothing": ("v={{ nothing }}\n", b"v=\n"),
    "one number": ("{{ 1 + 2 }}\n", b"3"),
    "backslash escapes": ("t={{ 'a\\tb' }}\n", b"t=a\tb\n"),
    "macro": ("{% macro m(v) %}\n<{{ v }}>\n{% endmacro %}\n{{ m(1) }}{{ m(2) }}\n", b"<1>\n<2>\n"),
    "crlf template": ("a={{ x }}\r\nb\r\n", b"a=X\nb\n"),
    "plain crlf file": ("a\r\nb\r\n", b"a\r\nb\r\n"),
    "#jinja2: header": ("#jinja2: lstrip_blocks: True\n  {% if true %}\n  x\n  {% endif %}\n", b"  x\n"),
    "include": ("top\n{% include 'part.j2' %}\nafter {% include 'part.j2' %}!\n", b"top\npart Xafter part X!\n"),
    "import": ("{% from 'macros.j2' import line %}\n{% for p in ports %}\n{{ line('p', p) }}\n{% endfor %}\n",
               b"p = 80\n\np = 443\n\n"),
}

#: name: (template text, task options, what ansible-core wrote)
WITH_OPTIONS: dict[str, tuple[str, dict[str, Any], bytes]] = {
    "trim_blocks off": ("{% for p in ports %}\n{{ p }}\n{% endfor %}\n", {"trim_blocks": False}, b"\n80\n\n443\n"),
    "lstrip_blocks on": ("top\n  {% if true %}\n  in\n  {% endif %}\n  end\n", {"lstrip_blocks": True},
                         b"top\n  in\n  end\n"),
    "both": ("  {% for p in ports %}\n  {{ p }}\n  {% endfor %}\n", {"lstrip_blocks": True, "trim_blocks": False},
             b"\n  80\n\n  443\n"),
    "crlf": ("a\n{% for p in ports %}\n{{ p }}\n{% endfor %}\n\n", {"newline_sequence": "\r\n"},
             b"a\r\n80\r\n443\r\n\r\n"),
    "the header wins": ("#jinja2: trim_blocks: True\n{% if true %}\nx\n{% endif %}\n", {"trim_blocks": False}, b"x\n"),
}


def play(tmp_path: Path, tasks: list[dict[str, Any]], play_vars: dict[str, Any] | None = None) -> dict[str, str]:
    """Run the tasks on localhost; each task's status by name."""
    pb = write_yaml(tmp_path / "pb.yml", yaml.safe_dump([{"hosts": "localhost", "vars": play_vars or VARS,
                                                          "tasks": tasks}], sort_keys=False))
    events = tmp_path / "events.jsonl"
    res = cli("play", str(pb), "--json-events", str(events), cwd=tmp_path)
    assert res.rc == 0, res.out + res.err
    return {e["task"]: e["status"] for e in task_ends(read_events(events))}


def templates(tmp_path: Path, cases: dict[str, str], options: dict[str, dict[str, Any]] | None = None,
              ) -> list[dict[str, Any]]:
    (tmp_path / "templates").mkdir(exist_ok=True)
    (tmp_path / "templates" / "part.j2").write_text("part {{ x }}\n")
    (tmp_path / "templates" / "macros.j2").write_text("{% macro line(k, v) %}\n{{ k }} = {{ v }}\n{% endmacro %}\n")
    tasks = []
    for i, (name, text) in enumerate(cases.items()):
        (tmp_path / f"t{i}.j2").write_bytes(text.encode())
        tasks.append({"name": name, "template": {"src": f"t{i}.j2", "dest": str(tmp_path / f"out{i}"),
                                                 **(options or {}).get(name, {})}})
    return tasks


def test_template_writes_what_ansible_core_writes(tmp_path: Path) -> None:
    tasks = templates(tmp_path, {name: text for name, (text, _) in ANSIBLE_CORE.items()})
    assert set(play(tmp_path, tasks).values()) == {"changed"}
    written = {name: (tmp_path / f"out{i}").read_bytes() for i, name in enumerate(ANSIBLE_CORE)}
    assert written == {name: expected for name, (_, expected) in ANSIBLE_CORE.items()}
    assert set(play(tmp_path, tasks).values()) == {"ok"}


def test_a_file_last_written_by_ansible_core_is_ok(tmp_path: Path) -> None:
    text, by_ansible = ANSIBLE_CORE["for loop"]
    tasks = templates(tmp_path, {"config": text})
    (tmp_path / "out0").write_bytes(by_ansible)
    assert play(tmp_path, tasks) == {"config": "ok"}
    assert (tmp_path / "out0").read_bytes() == by_ansible


def test_trim_blocks_lstrip_blocks_and_newline_sequence_options(tmp_path: Path) -> None:
    tasks = templates(tmp_path, {name: text for name, (text, _, _) in WITH_OPTIONS.items()},
                      {name: opts for name, (_, opts, _) in WITH_OPTIONS.items()})
    tasks.append({"name": "key=value", "template": f"src=t0.j2 dest={tmp_path / 'kv'} trim_blocks=no"})
    play(tmp_path, tasks)
    written = {name: (tmp_path / f"out{i}").read_bytes() for i, name in enumerate(WITH_OPTIONS)}
    assert written == {name: expected for name, (_, _, expected) in WITH_OPTIONS.items()}
    assert (tmp_path / "kv").read_bytes() == WITH_OPTIONS["trim_blocks off"][2]


def test_task_arguments_keep_their_own_rendering(tmp_path: Path) -> None:
    """Only template files follow the template module's settings: a task argument's block tag
    keeps its newline, and its backslashes stay as written, as before. A None part is left out
    in both, as ansible-core leaves it out."""
    dest = tmp_path / "copied"
    play(tmp_path, [{"name": "c", "copy": {"content": "{% for p in ports %}\n{{ p }}\n{% endfor %}\n"
                                                      "{{ 'a\\tb' }}|{{ nothing }}\n", "dest": str(dest)}}])
    assert dest.read_bytes() == b"\n80\n\n443\n\na\\tb|\n"
