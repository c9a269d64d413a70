"""become with a password: the privilege layer that reads the password from its stdin.

The password never goes into an argv (every user of the target can read /proc/PID/cmdline,
and the controller's too): the connection sends it as the first lines of the command's
stdin (base.py), and a small reader at the start of the layer takes exactly those lines -
`read` takes one byte at a time from a pipe - leaving the rest of stdin to the command (a
task's script, the agent's protocol).

sudo: the reader first asks `sudo -n -k` whether a password is needed at all (a NOPASSWD
rule, or root). If it is, it checks the password once with `sudo -k -S` on a stdin that
holds only the password, so a wrong one fails at once (sudo's second prompt reads EOF)
instead of reading the command's stdin as more tries; then it execs `sudo -k -S`, which
prompts (-k: cached credentials are ignored, so whether it prompts is certain) and reads the
second copy of the password. Whatever the case, both lines are consumed before the command.

su reads a password only from a terminal: a Python reader makes a pty for su alone, types the
password when su prompts, and hands the command the original stdin on fd 3.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

#: sudo's prompt (-p), unique to this process: stderr that shows it comes from sudo asking.
PROMPT = f"[opsrunner-become {secrets.token_hex(4)}] password: "
#: What the reader writes to stderr when the password was refused (taskconnection names it).
REFUSED = "opsrunner-become: the become password was refused"
#: The reader's exit status when the password was refused.
EXIT_REFUSED = 126

_SUDO_READER = (
    'u=$1 p=$2; shift 2\n'
    'IFS= read -r opsrunner_pw || { echo "opsrunner-become: no password on stdin" >&2; exit 125; }\n'
    'command -v sudo >/dev/null || { echo "opsrunner-become: sudo: command not found" >&2; exit 127; }\n'
    'if sudo -n -k -u "$u" true 2>/dev/null; then\n'
    '  IFS= read -r opsrunner_pw; unset opsrunner_pw; exec sudo -n -H -u "$u" -- "$@"\n'
    'fi\n'
    'opsrunner_err=$( { printf \'%s\\n\' "$opsrunner_pw" | sudo -k -S -p "$p" -u "$u" true; } 2>&1 >/dev/null )\n'
    'opsrunner_rc=$?\n'
    'unset opsrunner_pw\n'
    'if [ "$opsrunner_rc" -ne 0 ]; then\n'
    f'  printf \'%s (sudo as %s): %s\\n\' "{REFUSED}" "$u" "$opsrunner_err" >&2; exit {EXIT_REFUSED}\n'
    'fi\n'
    'exec sudo -k -S -p "" -H -u "$u" -- "$@"\n'
)

#: Run with python3 -S -c: argv[1] the user, argv[2] the command for su's shell.
_SU_READER = f'''
import os, select, sys, termios, time
def line():
    b = b""
    while True:
        c = os.read(0, 1)
        if c in (b"", b"\\n"):
            return b
        b += c
pw = line()
keep, keep_err = os.dup(0), os.dup(2)
master, slave = os.openpty()
pid = os.fork()
if pid == 0:
    import fcntl
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    # su itself talks on the pty (its prompt, its errors); the command gets the original
    # stdin and stderr back from fds 3 and 4.
    os.dup2(keep, 3)
    os.dup2(keep_err, 4)
    os.dup2(slave, 0)
    os.dup2(slave, 2)
    os.set_inheritable(3, True)  # dup2 onto itself leaves the flag as it was
    os.set_inheritable(4, True)
    for fd in {{master, slave, keep, keep_err}} - {{0, 2, 3, 4}}:
        os.close(fd)
    os.execvp("su", ["su", sys.argv[1], "-s", "/bin/sh", "-c", "exec 0<&3 2>&4 3<&- 4<&-; " + sys.argv[2]])
os.close(keep)
os.close(keep_err)
said = b""
def drain(wait):
    global said
    while select.select([master], [], [], wait)[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            return
        if not chunk:
            return
        said = (said + chunk)[-4096:]
        wait = 0
# The password is typed once su's terminal stops echoing (a no-echo read is waiting):
# typed earlier, the tcsetattr(TCSAFLUSH) that turns echo off would discard it.
sent, done, status = False, 0, 0
until = time.monotonic() + 30  # su asks at once, or not at all (then the command just runs)
while not sent and time.monotonic() < until:
    drain(0.02)
    try:
        quiet = not termios.tcgetattr(slave)[3] & termios.ECHO
    except termios.error:
        quiet = False
    if quiet:
        os.write(master, pw + b"\\n")
        sent = True
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
del pw
if not done:
    status = os.waitpid(pid, 0)[1]
drain(0)
code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
text = said.decode("utf-8", "replace")
errors = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("su:")]
if errors:
    refused = any("uthentication failure" in ln for ln in errors)
    sys.stderr.write(("{REFUSED} (su as %s): " % sys.argv[1] if refused else "") + "; ".join(errors) + "\\n")
sys.exit(code)
'''


@dataclass(frozen=True)
class BecomeLayer:
    """The privilege layer with a password: wraps the argv inside it, and says what goes
    first on the command's stdin. The password is left out of repr (logs show the layer)."""

    method: str
    user: str
    password: str = field(repr=False)

    @property
    def prefix(self) -> tuple[str, ...]:
        """How messages name the layer (the reader's script left out)."""
        return (self.method, "-u", self.user) if self.method == "sudo" else (self.method, self.user)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        if self.method == "su":
            import shlex

            return ["python3", "-S", "-c", _SU_READER, self.user, shlex.join(argv)]
        return ["/bin/sh", "-c", _SUDO_READER, "opsrunner-become", self.user, PROMPT, *argv]

    def stdin_prefix(self) -> bytes:
        """The lines the reader takes before the command's own stdin."""
        line = self.password.encode() + b"\n"
        return line if self.method == "su" else line * 2
