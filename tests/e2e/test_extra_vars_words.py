"""`-e key=value` split and unquoted as ansible-playbook does (ansible-core 2.19's split_args
and parse_kv): JSON in a value is kept as typed, quotes and all; `x={{ y }}` is one word. A
problem in an -e names which -e it is and quotes nothing that may be a secret; a secret typed
into a mapping's key (YAML's `{HF_TOKEN:tok}`, no space after the colon) is masked where the
key's path is shown. Each through the CLI, in a process of its own, as a user runs it."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from opsrunner.secrets import is_secret_name
from tests.conftest import ROOT
from tests.helpers import CliResult, ProjectEnv, cli_subprocess
from tests.web.dashboard import Project, serving

TOKEN = "tok_abc123xyz"
JSON_ENV = f'{{"HF_TOKEN":"{TOKEN}"}}'

PLAYBOOK = """- hosts: all
  gather_facts: false
  tasks:
    - shell: "printf '%s\\\\n' '{{ train_env }}' '{{ x }}' '{{ z }}' '{{ q }}' > {{ out_file }}"
"""


@pytest.fixture
def project(tmp_path: Path) -> ProjectEnv:
    env = ProjectEnv(tmp_path)
    (env.project / "inv.yml").write_text(f"all:\n  hosts:\n    node1:\n      connection: local\n"
                                         f"      out_file: {tmp_path / 'touched'}\n")
    (env.project / "site.yml").write_text(PLAYBOOK)
    return env


def _nowhere(secret: str, env: ProjectEnv, *outputs: str) -> None:
    """`secret` in none of `outputs`, nor in the history: `history --json` and `show` of every run."""
    runs = env.history()
    shown = [env.run("show", run["id"]).out for run in runs]
    for where, text in [*enumerate(outputs), ("history --json", json.dumps(runs)), *enumerate(shown)]:
        assert secret not in text, f"{secret!r} in {where}: {text}"


def test_a_value_keeps_its_json_and_a_jinja_block_is_one_word(project: ProjectEnv) -> None:
    out_file = project.root / "touched"  # the inventory's out_file
    res = project.run("play", "site.yml", "-i", "inv.yml", "-vvv", "-e", f"train_env={JSON_ENV}", "-e", "y=5",
                      "-e", 'x={{ y }} z={% if y == "5" %}five{% endif %}', "-e", 'q=a"b c"')
    assert res.rc == 0, res.out + res.err
    # As ansible-playbook: the JSON as typed, one string; only a value's outer quotes go.
    assert out_file.read_text().splitlines() == [JSON_ENV, "5", "five", 'a"b c"']
    [run] = project.history()
    assert run["extra_vars"]["train_env"] == '{"HF_TOKEN":"********"}' and run["extra_vars"]["x"] == "{{ y }}"
    _nowhere(TOKEN, project, res.out, res.err)


def _demo(env: ProjectEnv, home: Path, *args: str) -> CliResult:
    """The demo restart (-C: nothing changed) with this project's history, in a private HOME."""
    return cli_subprocess("play", "restart_training.yml", "-C", *args, cwd=ROOT,
                          env={**env.vars, "HOME": str(home)})


def test_the_demo_restart_takes_a_json_env_and_shows_its_token_nowhere(tmp_path: Path, home: Path) -> None:
    env = ProjectEnv(tmp_path)
    res = _demo(env, home, "-vvv", "-e", f"train_env={JSON_ENV}")
    assert res.rc == 0, res.out + res.err
    assert '"env": {"HF_TOKEN": "********"}' in res.out  # the launch got it as a mapping
    _nowhere(TOKEN, env, res.out, res.err)


def test_a_secret_typed_into_a_key_is_masked_in_its_key_path(tmp_path: Path, home: Path) -> None:
    """`{HF_TOKEN:tok}` is a mapping whose one key is `HF_TOKEN:tok` (null value), in -e (read
    as a mapping by the role's `env:`) as in an inventory: the argument's path names that key."""
    site = Project(tmp_path)  # its history is the one the dashboard serves
    inventory = tmp_path / "leak.yml"
    inventory.write_text(f"all:\n  hosts:\n    localhost:\n      train_env: {{HF_TOKEN:{TOKEN}}}\n")
    for args in (["-e", f"train_env={{HF_TOKEN:{TOKEN}}}"], ["-i", "inventory/hosts.yml", "-i", str(inventory)]):
        res = cli_subprocess("play", "restart_training.yml", "-C", *args, cwd=ROOT,
                             env={**site.env, "HOME": str(home)})
        assert res.rc == 4, res.out + res.err
        assert "launch_detached argument 'env.HF_TOKEN:********': None is not a string" in res.err, res.err
        assert TOKEN not in res.out + res.err
        assert not (home / "opsrunner-demo").exists()  # bad input: no host touched
    runs = json.loads(site.run("history", "--json").out)
    assert [r["exit_code"] for r in runs] == [4, 4]
    with serving(site) as server:
        for run in runs:
            for path in (f"/api/runs/{run['id']}", f"/runs/{run['id']}"):
                page = server.get(path)
                assert page.status == 200 and "HF_TOKEN:********" in page.text and TOKEN not in page.text, path


BAD = [  # (the -e values, what stderr says, what it must not show: a secret, or a piece that may be one)
    (["a=1", "kill_grace= 1000", "b=2"],
     "-e #2 (of 3): expected key=value, got '1000' (word 2 of 2); a space ends the value of kill_grace=", None),
    (["train_env={HF_TOKEN: zzhiddenvaluezz}"],
     "-e #1 (of 1): expected key=value, got '********' (word 2 of 2; not shown: it may hold a secret)",
     "zzhiddenvaluezz"),
    (["db_password=hunter22 oops"], "-e #1 (of 1): expected key=value, got '********' (word 2 of 2;", "hunter22"),
    (["ok=1", "ghp_Zr8kQ2mX9vL4tN7pW1sY5bC3"],
     "-e #2 (of 2): expected key=value, got '********' (word 1 of 1;", "Zr8kQ2mX9vL4tN7pW1sY5bC3"),
    (["ok=1", "novalue"], "-e #2 (of 2): expected key=value, got 'novalue' (word 1 of 1)", None),
    (["ok=1", 'msg="unclosed zzhiddenvaluezz'], "-e #2 (of 2): cannot split it into key=value words: an unbalanced "
                                                "quote or Jinja block", "zzhiddenvaluezz"),
    (["x={{ y"], "-e #1 (of 1): cannot split it into key=value words", None),
    (['{"api_token": "zzhiddenvaluezz", "n": [}'], "-e #1 (of 1):1:", "zzhiddenvaluezz"),
    (["{api_token: 1, api_token: 2}"], "-e #1 (of 1):1:16: duplicate key '********'", None),
    (["ok=1", "[1, 2]"], "-e #2 (of 2): extra vars must be a mapping", None),
    # A key or a word that names no secret is quoted as typed, uppercase, dotted, or in an -e
    # that assigns a secret elsewhere; a secret's value, cut off by a space or not, stays hidden.
    (["MODEL.lr=3e-4 1bad=2"], "-e #1 (of 1): 'MODEL.lr' is not a variable name (letters, digits and _, not "
                               "starting with a digit; word 1 of 2) (at MODEL.lr)", None),
    (["LR=1 oops"], "-e #1 (of 1): expected key=value, got 'oops' (word 2 of 2)", None),
    (["LR = 1"], "-e #1 (of 1): expected key=value, got 'LR' (word 1 of 3)", None),
    (["db_password=zzhiddenvaluezz model.optimizer.lr_warmup=3"],
     "-e #1 (of 1): 'model.optimizer.lr_warmup' is not a variable name", "zzhiddenvaluezz"),
    (["db_password=Tr0ub4dor &3xyz=1"], "-e #1 (of 1): '********' is not a variable name", "3xyz"),
    (["{MODEL.lr: 1, MODEL.lr: 2}"], "-e #1 (of 1):1:15: duplicate key 'MODEL.lr' (first defined at line 1)", None),
    # Blanks hold nothing: said so, not that they may hold a secret.
    (["ok=1", "   "], "-e #2 (of 2): it is empty (only blanks), not key=value words", None),
    (["  ok=1"], "-e #1 (of 1): word 1 of 2 is empty (only blanks): leave the blanks out", None),
]


@pytest.mark.parametrize("values,told,hidden", BAD, ids=[str(i) for i in range(len(BAD))])
def test_an_e_problem_names_its_e_and_quotes_no_secret(project: ProjectEnv, values: list[str], told: str,
                                                       hidden: str | None) -> None:
    out_file = project.root / "touched"  # the inventory's out_file
    res = project.run("play", "site.yml", "-i", "inv.yml", *(a for v in values for a in ("-e", v)))
    assert res.rc == 4, res.out + res.err
    assert told in res.err, res.err
    assert not out_file.exists()  # bad input: no host touched
    [run] = project.history()
    assert run["exit_code"] == 4 and told in run["reason"] and told in project.run("show", run["id"]).out
    if hidden is None:
        return
    assert hidden not in res.out + res.err and hidden not in run["reason"]
    if any(is_secret_name(word) for word in re.findall(r"\w+", " ".join(values))):
        _nowhere(hidden, project, res.out, res.err)  # a secret: not in the command line recorded either


FORGOTTEN_EQUALS = [  # (the -e values, what stderr says, the password it must not show)
    (["LR=1 OOPS"], "-e #1 (of 1): expected key=value, got '********' (word 2 of 2; not shown", "OOPS"),
    (["ok=1", "Swordfish"], "-e #2 (of 2): expected key=value, got '********' (word 1 of 1; not shown",
     "Swordfish"),
    (["db_password Swordfish"], "-e #1 (of 1): expected key=value, got '********' (word 2 of 2; not shown",
     "Swordfish"),
    (["db_password swordfish"], "-e #1 (of 1): expected key=value, got '********' (word 2 of 2; not shown",
     "swordfish"),
    (["db_password = swordfish"], "-e #1 (of 1): expected key=value, got '********' (word 3 of 3; not shown",
     "swordfish"),
    (["db_password : swordfish x=1 oops"], "-e #1 (of 1): expected key=value, got 'oops' (word 5 of 5)",
     "swordfish"),
]


@pytest.mark.parametrize("values,told,hidden", FORGOTTEN_EQUALS, ids=[str(i) for i in range(len(FORGOTTEN_EQUALS))])
def test_a_password_typed_without_its_equals_sign_is_not_quoted(project: ProjectEnv, values: list[str], told: str,
                                                                hidden: str) -> None:
    """A bare word that is no short lowercase name may be a password typed without its key
    (`Swordfish`, `OOPS`), and any word after a secret's name with the `=` forgotten may be its
    value: `-e 'db_password Swordfish'` was told as `got 'Swordfish'`, in stderr and the
    history's reason, and the recorded command line kept it (`-e 'db_password Swordfish'`). A
    key typed with spaces around `=` is still quoted (`LR = 1`)."""
    res = project.run("play", "site.yml", "-i", "inv.yml", *(a for v in values for a in ("-e", v)))
    assert res.rc == 4, res.out + res.err
    assert told in res.err, res.err
    assert not (project.root / "touched").exists()  # bad input: no host touched
    [run] = project.history()
    assert run["exit_code"] == 4 and told in run["reason"], run
    assert hidden not in res.out + res.err and hidden not in run["reason"], res.err
    if any(is_secret_name(word) for word in re.findall(r"\w+", " ".join(values))):
        _nowhere(hidden, project, res.out, res.err)  # the recorded command line: `-e '********'`
        assert run["command"].endswith(" -e '********'"), run


def test_an_empty_e_gives_nothing_as_in_ansible_playbook(project: ProjectEnv) -> None:
    """`-e "$EXTRA"` with nothing in $EXTRA: ansible-playbook skips it, and so does opsrunner
    (an -e of blanks is refused: test_an_e_problem_names_its_e_and_quotes_no_secret)."""
    res = project.run("play", "site.yml", "-i", "inv.yml", "-e", "", "-e", "train_env=a x=b z=c q=d")
    assert res.rc == 0, res.out + res.err
    assert (project.root / "touched").read_text().splitlines() == ["a", "b", "c", "d"]


#: Where a project may set its own secret names, besides the default ones.
CONFIGURED = {
    "inventory": ("inv.yml", "all:\n  vars:\n    secret_name_patterns: ['*_cred']\n  hosts:\n    node1:\n"
                             "      connection: local\n      out_file: {out}\n", ()),
    "playbook": ("site.yml", "- hosts: all\n  gather_facts: false\n  vars: {secret_name_patterns: ['*_cred']}\n"
                             "  tasks:\n    - shell: touch {{ out_file }}\n", ()),
    "-e": ("unused.yml", "", ("-e", '{"secret_name_patterns": ["*_cred"]}')),
    # A playbook refused at load (an unknown keyword) still names its secrets.
    "refused playbook": ("site.yml", "- hosts: all\n  gather_facts: false\n  vars: {secret_name_patterns: ['*_cred']}\n"
                                     "  tasks:\n    - shell: touch {{ out_file }}\n      no_such_keyword: 1\n", ()),
}


@pytest.mark.parametrize("where", list(CONFIGURED))
def test_an_e_problem_hides_what_the_project_s_secret_names_name(project: ProjectEnv, where: str) -> None:
    """`secret_name_patterns: ['*_cred']`: `-e 'db_cred= hunter'` quoted the rest of the
    credential (`got 'hunter'`), as the default names alone judged the -e."""
    name, text, args = CONFIGURED[where]
    (project.project / name).write_text(text.replace("{out}", str(project.root / "touched")))
    res = project.run("play", "site.yml", "-i", "inv.yml", *args, "-e", "db_cred= hunter ok=1 1bad=2")
    assert res.rc == 4, res.out + res.err
    told = ("expected key=value, got '********' (word 2 of 4; not shown: it may hold a secret); a space ends the "
            "value of ********=")
    assert told in res.err and "'1bad' is not a variable name" in res.err, res.err
    assert "hunter" not in res.out + res.err
    assert not (project.root / "touched").exists()  # bad input: no host touched
    [run] = project.history()
    assert run["exit_code"] == 4 and told in run["reason"] and "hunter" not in run["reason"], run
    if where == "inventory":  # the recorded command line too (the -e-set and playbook-set names: not yet)
        _nowhere("hunter", project, res.out, res.err)


def test_a_secret_typed_into_a_playbook_key_is_masked(project: ProjectEnv) -> None:
    """The same YAML slip in the playbook itself: a module argument's key and an `environment:`
    variable name, both told at load, exit 4 (the environment's once made the task fail after
    the tasks before it ran: `export HF_TOKEN:tok=` would have echoed it, and the shell's error
    too)."""
    (project.project / "args.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - launch_detached: {command: 'sleep 1', "
        f"pidfile: /tmp/x.pid, log: /tmp/x.log, env: {{HF_TOKEN:{TOKEN}}}}}\n")
    (project.project / "env.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - shell: touch {{ out_file }}\n"
        f"      environment: {{HF_TOKEN:{TOKEN}}}\n")
    res = project.run("play", "args.yml", "-i", "inv.yml", "-vvv")
    assert res.rc == 4, res.out + res.err
    assert "launch_detached argument 'env.HF_TOKEN:********'" in res.err, res.err
    ran = project.run("play", "env.yml", "-i", "inv.yml", "-vvv")
    assert ran.rc == 4, ran.out + ran.err
    assert "env.yml:5:21: environment variable name 'HF_TOKEN:********' is not a name" in ran.err, ran.err
    assert not (project.root / "touched").exists()
    _nowhere(TOKEN, project, res.out, res.err, ran.out, ran.err)


NO_CHARACTER = [  # an escape that makes no character UTF-8 can hold: a crash (exit 250), or both tasks
    # ran and then the output broke (exit 250, "record incomplete")
    (r"x=\N{NOSUCH}", "-e #1 (of 1): word 1 of 1 has an escape that makes no character"),
    (r"x=\U00110000", "-e #1 (of 1): word 1 of 1 has an escape that makes no character"),
    (r"x=1 y=\ud800", "-e #1 (of 1): word 2 of 2 has an escape that makes no character"),
    (r'{"x": "\ud800"}', "-e #1 (of 1): an escape that makes no character (a lone surrogate \\ud800-\\udfff) in "
                         "the value of x"),
]


@pytest.mark.parametrize("value,told", NO_CHARACTER, ids=[str(i) for i in range(len(NO_CHARACTER))])
def test_an_escape_that_makes_no_character_is_refused(project: ProjectEnv, value: str, told: str) -> None:
    res = project.run("play", "site.yml", "-i", "inv.yml", "-e", value)
    assert res.rc == 4, res.out + res.err
    assert told in res.err, res.err
    assert not (project.root / "touched").exists()  # bad input: no host touched
    [run] = project.history()
    assert run["exit_code"] == 4 and told in run["reason"], run


CUT_SECRETS = [  # (an -e that names a secret whose value a space cut, the rest of that value)
    ("db_password=Tr0ub4dor &3xyz", "&3xyz"),
    (r"x=1 api_token=s3cr3tA\ s3cr3tB", "s3cr3tB"),
]


def test_the_rest_of_a_secret_cut_off_by_a_space_is_recorded_nowhere(tmp_path: Path) -> None:
    """The error hid the rest of the value, but the recorded command line kept it
    (`-e 'db_password=******** &3xyz'`) in history --json, show and the dashboard."""
    site = Project(tmp_path)
    for value, rest in CUT_SECRETS:
        res = site.run("play", "site.yml", "-i", "inv.yml", "-e", value)
        assert res.rc == 4 and rest not in res.out + res.err, res.out + res.err
    runs = json.loads(site.run("history", "--json").out)
    assert [r["command"] for r in runs] == ["opsrunner play site.yml -i inv.yml -e '********'"] * 2, runs
    with serving(site) as server:
        for run in runs:
            for path in (f"/api/runs/{run['id']}", f"/runs/{run['id']}", "/"):
                page = server.get(path)
                assert page.status == 200 and all(rest not in page.text for _, rest in CUT_SECRETS), path
    assert all(rest not in site.run("show", run["id"]).out for run in runs for _, rest in CUT_SECRETS)


def test_the_rest_of_a_secret_in_an_older_record_is_hidden_on_the_dashboard(tmp_path: Path) -> None:
    """The dashboard masks a command line recorded before (`api_token=******** s3cr3tB`) as
    the history now records it; a mapping's secret value is hidden to its end, spaces and all."""
    from opsrunner.extravars import refused
    from opsrunner.secrets import Masker

    assert Masker().mask_argv(["api_token=******** s3cr3tB y=2", "--extra-vars=db_password=a b",
                               "{db_password: Tr0ub4dor &3xyz}"], refused) == [
        "********", "--extra-vars=********", "{db_password: ********}"]


def test_an_empty_value_followed_by_another_word_is_refused(project: ProjectEnv) -> None:
    """`-e "api_token= c2VjcmV0dG9rZW4="` ran (rc 0) with api_token '' and the token made a
    key, recorded in clear (extra_vars and the command line). Now exit 4, quoting nothing of
    it, the -e recorded masked whole; `k=''` still gives an empty value."""
    token = "c2VjcmV0dG9rZW4"
    res = project.run("play", "site.yml", "-i", "inv.yml", "-e", "x=1", "-e", f"api_token= {token}=")
    assert res.rc == 4, res.out + res.err
    assert ("-e #2 (of 2): word 2 of 2 follows an empty value; a space ends the value of ********=: quote a value "
            """with spaces (-e 'k="a b"'), or give an empty one as k=''""") in res.err, res.err
    assert not (project.root / "touched").exists()  # bad input: no host touched
    _nowhere(token, project, res.out, res.err)
    [run] = project.history()
    assert run["command"].endswith("-e x=1 -e '********'"), run
    plain = project.run("play", "site.yml", "-i", "inv.yml", "-e", "log_path= n=1")
    assert plain.rc == 4 and "a space ends the value of log_path=" in plain.err, plain.err


def test_a_secret_named_word_in_a_dashed_key_masks_nothing_else(project: ProjectEnv) -> None:
    """`vault_cfg: {token-file: /etc/vault/tok}` made `file` secret for the whole run
    (`TASK [copy the config ********]`, `pro******** loaded`): only `:` and `=` after a
    secret-named word are a slip that put a secret into a key."""
    (project.project / "inv.yml").write_text(
        "all:\n  hosts:\n    node1:\n      connection: local\n      vault_cfg: {token-file: /etc/vault/tok}\n"
        f"      slip: {{HF_TOKEN:{TOKEN}}}\n")
    (project.project / "file.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: copy the config file\n"
        "      debug: {msg: \"profile loaded from {{ vault_cfg['token-file'] }}\"}\n"
        "    - debug: {msg: profile loaded}\n"
        "    - debug: {msg: \"{{ slip.keys() | list }}\"}\n")
    res = project.run("play", "file.yml", "-i", "inv.yml", "-v")
    assert res.rc == 0, res.out + res.err
    assert "TASK [copy the config file]" in res.out and "profile loaded from ********" in res.out, res.out
    assert "ok: [node1] => profile loaded (" in res.out, res.out
    assert TOKEN not in res.out + res.err and "HF_TOKEN:********" in res.out, res.out


def test_a_file_pasted_into_an_e_is_refused_at_once(project: ProjectEnv) -> None:
    """`-e "$(cat vars.yml)"` (72 KB, a bad word per line): every refused word scanned the
    whole -e for a secret name again (9.5 s before exit 4), and each was told. Now the -e is
    scanned once, and 20 problems are told, then how many more."""
    pasted = "".join(f"setting_{n}: value_{n}\n" for n in range(3000))
    assert len(pasted) > 70_000
    started = time.monotonic()
    res = project.run("play", "site.yml", "-i", "inv.yml", "-e", pasted)
    assert res.rc == 4, res.out + res.err
    assert time.monotonic() - started < 5
    assert res.err.count("-e #1 (of 1): expected key=value, got") == 20, res.err
    assert "-e #1 (of 1): and 5980 more problem(s) like these" in res.err, res.err
