"""Masking logic (pure): what counts as secret and how it is hidden."""

from __future__ import annotations

from opsrunner.events import CommandSent, TaskEnd
from opsrunner.results import Status, TaskResult
from opsrunner.secrets import CENSORED, MASK, Masker, SecretStr, censor, is_secret_name
from opsrunner.templating import LazyVars
from opsrunner.yamlsource import load_yaml_text


def test_secret_names_default_patterns() -> None:
    for name in ("db_password", "PASSWD", "client_secret", "hf_token", "openai_api_key", "MyPassword2"):
        assert is_secret_name(name), name
    for name in ("user", "port", "tokenizer_path_x"[:0] or "job_name", "apikey_hint"):
        assert not is_secret_name(name), name


def test_mask_replaces_every_spelling() -> None:
    m = Masker(["s3cr'et value"])
    text = "raw s3cr'et value, shell 's3cr'\"'\"'et value'"
    masked = m.mask(text)
    assert "s3cr" not in masked
    assert masked.count(MASK) == 2
    lines = Masker(["line1\nline2"])
    assert lines.mask('{"msg": "line1\\nline2"}') == '{"msg": "' + MASK + '"}'  # JSON-escaped


def test_short_values_and_bools_are_not_masked() -> None:
    m = Masker(["ab", True, 7])
    assert m.mask("ab True 7") == "ab True 7"
    assert not m


def test_add_vars_finds_secret_names_tagged_values_and_templated_values() -> None:
    data = load_yaml_text("plain: !secret tagged-value-1\nnested: {inner: {db_password: nested-pw}}\n"
                          "list: [!secret in-a-list]\n", "v.yml")
    variables = LazyVars([data, {"api_token": "{{ 'tok' ~ 'en-xyz' }}", "user": "alice"}])
    m = Masker()
    m.add_vars(variables)
    out = m.mask("tagged-value-1 nested-pw in-a-list token-xyz alice")
    assert out == f"{MASK} {MASK} {MASK} {MASK} alice"


def test_secret_name_patterns_variable_replaces_defaults() -> None:
    m = Masker()
    m.add_vars({"secret_name_patterns": ["*_cred"], "db_cred": "cred-value", "db_password": "pw-value"})
    assert m.mask("cred-value pw-value") == f"{MASK} pw-value"


def test_secret_tag_on_a_mapping_is_a_positioned_error() -> None:
    import pytest

    from opsrunner.errors import ValidationError

    with pytest.raises(ValidationError) as exc:
        load_yaml_text("a: !secret {b: 1}\n", "v.yml")
    assert "v.yml:1:4: !secret applies to a single value" in str(exc.value)


def test_secret_str_survives_yaml_and_is_a_str() -> None:
    data = load_yaml_text("k: !secret 12345\n", "v.yml")
    assert isinstance(data["k"], SecretStr) and data["k"] == "12345"


def test_mask_event_masks_results_and_censors_no_log() -> None:
    m = Masker(["hunter22"])
    r = TaskResult(Status.FAILED, msg="'hunter22' is not of type 'number'", stdout="pw=hunter22",
                   data={"cmd": "echo hunter22", "hunter22": ["x hunter22"]},
                   items=[TaskResult(Status.OK, item="hunter22")], warnings=["hunter22"])
    shown = m.mask_event(TaskEnd("p", "t", "shell", "h", r)).result  # type: ignore[union-attr]
    assert "hunter22" not in repr(shown)
    assert r.msg.startswith("'hunter22'")  # the original is untouched (register sees real values)
    cmd = m.mask_event(CommandSent("h", "sh -c 'echo hunter22'"))
    assert "hunter22" not in cmd.command  # type: ignore[union-attr]
    r.no_log = True
    hidden = m.mask_event(TaskEnd("p", "t", "shell", "h", r)).result  # type: ignore[union-attr]
    assert hidden.msg == CENSORED and hidden.stdout == "" and hidden.data == {"censored": CENSORED}
    assert hidden.status == Status.FAILED and hidden.items[0].item is None


def test_censor_keeps_outcome() -> None:
    r = censor(TaskResult(Status.CHANGED, changed=True, rc=0, stdout="x", duration_s=1.5))
    assert (r.status, r.changed, r.duration_s, r.stdout, r.rc) == (Status.CHANGED, True, 1.5, "", None)


def test_masker_for_reads_extra_vars_and_every_inventory_host(tmp_path: object) -> None:
    from pathlib import Path

    from opsrunner.inventory import load_inventory
    from opsrunner.secrets import masker_for

    root = Path(str(tmp_path))
    (root / "inv.yml").write_text(
        "all:\n  vars: {shared_token: tok-shared}\n  hosts:\n"
        "    a: {login: !secret tagged-a}\n    b: {db_password: \"{{ 'pw-' ~ 'b' }}\"}\n")
    masker = masker_for(load_inventory([root / "inv.yml"], root), {"cli_secret": "from-cli"})
    assert masker.mask("tok-shared tagged-a pw-b from-cli plain") == f"{MASK} {MASK} {MASK} {MASK} plain"


def test_a_variable_replaced_by_a_new_container_is_searched_again() -> None:
    """Containers are searched once each (by identity): a registered result replaced by a new
    one is a new container, and the secrets in it are learnt."""
    masker = Masker()
    layer: dict[str, object] = {"result": {"items": [{"name": "a"}]}}
    masker.add_vars(LazyVars([layer]))
    masker.add_vars(LazyVars([layer]))
    assert masker.mask("token-one-xyz") == "token-one-xyz"
    layer["result"] = {"items": [{"api_token": "token-two-xyz"}], "note": SecretStr("hidden-value-1")}
    masker.add_vars(LazyVars([layer]))
    assert masker.mask("token-two-xyz and hidden-value-1") == f"{MASK} and {MASK}"


def test_add_vars_still_finds_secrets_beside_the_engine_made_vars() -> None:
    """add_vars passes the engine's magic variables by (secrets.ENGINE_MADE_VARS); a secret under
    any other name is still found, at any depth, and host names are left as they are."""
    m = Masker()
    hosts = [f"db-password-{i}.example" for i in range(3)]
    m.add_vars(LazyVars([{"deploy": {"db_password": "hunter22"}, "api_token": "tok-123"},
                         {"play_hosts": hosts, "ansible_play_hosts": hosts, "inventory_hostname": "h"}]))
    assert m.mask("hunter22 tok-123") == f"{MASK} {MASK}"
    assert m.mask(hosts[0]) == hosts[0]
