"""Hostile exec wrapper #2, like lxc-attach: waits for every copy of the output, and leaks an fd.

usage: fd_holder.py [--] ARGV...
Relays ARGV's stdout/stderr through pipes and does not return until every copy of
those pipes is closed, and also until every copy of one extra inherited descriptor
(fd 9, standing in for the pty lxc-attach hands its children) is closed. A naive
`job &` inside it makes the call hang until somebody kills the job.
"""

import os
import selectors
import sys

EXTRA_FD = 9


def main() -> int:
    argv = sys.argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    extra_r, extra_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.dup2(extra_w, EXTRA_FD)
        os.set_inheritable(EXTRA_FD, True)
        for fd in (out_r, out_w, err_r, err_w, extra_r, extra_w):
            if fd not in (1, 2, EXTRA_FD):
                os.close(fd)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"fd_holder: {argv[0]}: {exc.strerror}\n".encode())
            os._exit(127)
    for fd in (out_w, err_w, extra_w):
        os.close(fd)
    sel = selectors.DefaultSelector()
    sinks = {out_r: 1, err_r: 2, extra_r: None}
    for fd in sinks:
        sel.register(fd, selectors.EVENT_READ)
    while sinks:
        for key, _ in sel.select():
            data = os.read(key.fd, 65536)
            if not data:
                sel.unregister(key.fd)
                del sinks[key.fd]
            elif sinks[key.fd] is not None:
                os.write(sinks[key.fd], data)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
