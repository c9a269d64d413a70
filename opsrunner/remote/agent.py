# opsrunner-agent part 5: the dispatcher. The parts (procs, launch, verify, files, agent) are
# sent concatenated as one `python3 -S -c` script (Python >= 3.8, stdlib only).
# Protocol: stdin starts with one JSON line {"op": ..., "args": {...}}; what follows is the
# op's payload (a tar stream for "write"). The last stdout line is the JSON reply.
import json
import os
import sys

OPS = {"kill": op_kill, "select": op_select, "launch": op_launch, "verify": op_verify,
       "gpu_wait": op_gpu_wait, "clear": op_clear, "stat": op_stat, "write": op_write,
       "delete": op_delete, "read": op_read}


PATH_ARGS = ("pidfile", "log", "chdir", "dest")


def _own_source():
    if "__file__" in globals():  # imported from the target's cache directory
        with open(__file__) as fh:
            return fh.read()
    with open("/proc/self/cmdline", "rb") as fh:
        argv = fh.read().split(b"\0")
    return argv[argv.index(b"-c") + 1].decode("utf-8")  # works with or without -S before -c


def main():
    if "OPSRUNNER_SPEC" in os.environ:
        supervise()
        return
    global SOURCE
    SOURCE = _own_source()
    line = sys.stdin.buffer.readline()
    request = json.loads(line.decode("utf-8"))
    args = request.get("args") or {}
    for key in PATH_ARGS:
        if isinstance(args.get(key), str):
            args[key] = os.path.expanduser(args[key])
    try:
        reply = OPS[request["op"]](args)
    except Exception as exc:  # reported to the controller as the task's failure message
        reply = {"error": "%s: %s" % (type(exc).__name__, exc)}
    sys.stdout.write("\n" + json.dumps(reply) + "\n")
    sys.stdout.flush()


SOURCE = ""
if __name__ == "__main__":  # sent inline with -c (imported from the cache, the caller runs main)
    main()
