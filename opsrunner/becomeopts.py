"""The command line's become defaults (-b, --become-user, --become-method, -K), as the run
carries them. As in ansible-core they are defaults: a play's or task's own `become`,
`become_user` and `become_method` win, and a `become_password` variable wins over -K."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Variables that hold the become password, first found wins (opsrunner's, then Ansible's).
PASSWORD_VARS = ("become_password", "ansible_become_password", "ansible_become_pass")
METHODS = ("sudo", "su")


@dataclass(frozen=True)
class BecomeDefaults:
    become: bool = False
    user: str | None = None
    method: str | None = None
    #: The password typed at -K (never printed: left out of repr; the run's Masker knows it).
    password: str | None = field(default=None, repr=False)
