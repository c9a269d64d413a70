#!/usr/bin/env python3
"""A stand-in for a long training job: no GPU, no dependencies, Python >= 3.8.

It logs one line per step (step, loss, tokens/s), checkpoints and resumes, and on
SIGTERM saves a checkpoint and exits 0 - like a well-behaved trainer. Options make it
crash or hang on purpose, so `verify`'s diagnoses can be seen for real:

  --crash-after N   raise an exception at step N (a Traceback in the log, exit code 1)
  --hang-after N    stop logging at step N and sleep forever (the log stops growing)
  --exit-after N    finish cleanly at step N (exit code 0)
  --gpu-mb N        hold N MB of GPU memory while it runs (needs PyTorch with CUDA), so the
                    GPU checks (kill_old wait_gpu_free, verify gpu_min_memory_mb) can be seen
"""

import argparse
import json
import math
import os
import random
import signal
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run-name", default="demo")
    p.add_argument("--checkpoint", default="checkpoint.json", help="checkpoint file (resumed from if present)")
    p.add_argument("--cache-dir", default="", help="a compile cache to populate at start (like TorchInductor's)")
    p.add_argument("--step-time", type=float, default=0.2, help="seconds per step")
    p.add_argument("--save-every", type=int, default=10)
    p.add_argument("--crash-after", type=int, default=0)
    p.add_argument("--hang-after", type=int, default=0)
    p.add_argument("--exit-after", type=int, default=0)
    p.add_argument("--gpu-mb", type=int, default=0)
    return p.parse_args(argv)


def load_step(path):
    try:
        with open(path) as fh:
            return int(json.load(fh)["step"])
    except (OSError, ValueError, KeyError):
        return 0


def save(path, step):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"step": step, "saved_at": time.time()}, fh)
    os.replace(tmp, path)


def warm_cache(cache_dir):
    if not cache_dir:
        return
    os.makedirs(cache_dir, exist_ok=True)
    for i in range(4):
        with open(os.path.join(cache_dir, "kernel_%d.bin" % i), "wb") as fh:
            fh.write(os.urandom(64 * 1024))


def hold_gpu_memory(mb):
    """Allocate `mb` MB on each visible GPU; the allocation lives as long as the process."""
    if not mb:
        return []
    import torch  # only with --gpu-mb: the demo itself needs no dependency

    held = [torch.empty(mb * 1024 * 1024, dtype=torch.uint8, device="cuda:%d" % i)
            for i in range(torch.cuda.device_count())]
    print("holding %d MB on %d GPU(s)" % (mb, len(held)), flush=True)
    return held


def main(argv=None):
    args = parse_args(argv)
    state = {"step": load_step(args.checkpoint), "stop": False}

    def on_term(signum, frame):
        state["stop"] = True

    signal.signal(signal.SIGTERM, on_term)
    warm_cache(args.cache_dir)
    held = hold_gpu_memory(args.gpu_mb)
    start_step = state["step"]
    print("ready: training %s started at step %d (pid %d)" % (args.run_name, start_step, os.getpid()), flush=True)
    rng = random.Random(start_step)
    while not state["stop"]:
        state["step"] += 1
        step = state["step"]
        if args.crash_after and step - start_step >= args.crash_after:
            raise RuntimeError("simulated crash at step %d" % step)
        if args.hang_after and step - start_step >= args.hang_after:
            print("step %d: hanging (simulated)" % step, flush=True)
            while not state["stop"]:
                time.sleep(1)
            break
        time.sleep(args.step_time)
        loss = 4.0 * math.exp(-step / 500.0) + rng.random() * 0.05
        print("step %d loss %.4f tokens/s %d" % (step, loss, 9000 + rng.randint(0, 2000)), flush=True)
        if step % args.save_every == 0:
            save(args.checkpoint, step)
        if args.exit_after and step - start_step >= args.exit_after:
            break
    save(args.checkpoint, state["step"])
    del held
    why = "SIGTERM" if state["stop"] else "done"
    print("%s: checkpoint saved at step %d, exiting" % (why, state["step"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
