"""opsrunner's two locks, and who holds them.

- The run lock (run_lock.py), on the controller: one run of a playbook with its inventories
  at a time on this machine (`opsrunner play --lock`, and every scheduled run).
- The job lock, on a target: one restart of a job at a time, whichever playbook and
  controller restarts it. Its controller side is job_lock.py (the `job_lock` task and
  kill_old/launch_detached call it); its target side is remote/job_locks.py (held by the agent).

Both write the same holder record (holder.py), and a run that finds either taken says who
holds it with the same words: `locked by alice@ctl (opsrunner pid ..., playbook ..., started ...)`.
"""
