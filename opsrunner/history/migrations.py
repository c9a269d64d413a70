"""The history schema, one version at a time, for both backends.

Version N means the same tables and columns on SQLite and PostgreSQL; each entry moves the
schema one version up and is never edited once released. SQLite counts its version in
PRAGMA user_version (files written by earlier opsrunner versions migrate from there),
PostgreSQL in the table opsrunner_schema. The SQL of the stores is the same for both:
TEXT for JSON, INTEGER for flags, so one query reads either.
"""

from __future__ import annotations

SQLITE: tuple[str, ...] = (
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY, started REAL NOT NULL, ended REAL, user TEXT, controller TEXT,
        command TEXT, cwd TEXT, playbook TEXT, git_commit TEXT, git_dirty INTEGER,
        inventory TEXT, extra_vars TEXT, schedule TEXT, exit_code INTEGER, recap TEXT,
        notes TEXT NOT NULL DEFAULT '[]'
    );
    CREATE INDEX runs_started ON runs(started);
    CREATE TABLE results (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, seq INTEGER NOT NULL,
        play TEXT, task TEXT, module TEXT, host TEXT, status TEXT, changed INTEGER, handler INTEGER,
        msg TEXT, diagnosis TEXT, duration REAL, PRIMARY KEY (run_id, seq)
    );
    CREATE INDEX results_host ON results(host);
    """,
    # 2: who runs an open run, and its heartbeat (liveness.py): a row whose controller died
    # without closing it is shown as aborted, never as running.
    """
    ALTER TABLE runs ADD COLUMN heartbeat REAL;
    ALTER TABLE runs ADD COLUMN controller_pid INTEGER;
    ALTER TABLE runs ADD COLUMN controller_start INTEGER;
    ALTER TABLE runs ADD COLUMN controller_machine TEXT;
    ALTER TABLE runs ADD COLUMN current_task TEXT;
    CREATE INDEX results_run ON results(run_id, seq);
    """,
    # 3: what the dashboard and alerts show: the run's options (limit, tags, check mode), a
    # verify's log tail; the hosts of each run, newest first per host (the host filter reads
    # a host's runs from it instead of testing every run: 1 s -> 1 ms at 100,000 runs), and
    # the runs of a schedule.
    """
    ALTER TABLE runs ADD COLUMN check_mode INTEGER;
    ALTER TABLE runs ADD COLUMN options TEXT;
    ALTER TABLE results ADD COLUMN log_tail TEXT;
    CREATE INDEX runs_schedule ON runs(schedule, started);
    CREATE TABLE run_hosts (
        host TEXT NOT NULL, run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        run_started REAL NOT NULL, PRIMARY KEY (host, run_id)
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO run_hosts SELECT DISTINCT results.host, results.run_id, runs.started
        FROM results JOIN runs ON runs.id = results.run_id WHERE results.host IS NOT NULL;
    CREATE INDEX run_hosts_by_time ON run_hosts(host, run_started);
    """,
    # 4: scale-out (docs/scale-out.md): the run group that ties the slices of one logical run
    # together, and the slice (I/N) this run was.
    """
    ALTER TABLE runs ADD COLUMN run_group TEXT;
    ALTER TABLE runs ADD COLUMN slice TEXT;
    CREATE INDEX runs_group ON runs(run_group, started);
    """,
    # 5: runs that end before their play begins (bad input, no host to target, a refusal)
    # are recorded too: why the run ended (its error, masked) and, where the exit code alone
    # would mislead, what happened ("refused": a run lock held, a dirty checkout).
    """
    ALTER TABLE runs ADD COLUMN reason TEXT;
    ALTER TABLE runs ADD COLUMN outcome TEXT;
    """,
    # 6: a run whose history failed during it (a full disk) is closed later, from the outcome
    # it kept aside (outcomes.py): what its row lacks, and why.
    """
    ALTER TABLE runs ADD COLUMN record_gap TEXT;
    """,
)

#: The same versions for PostgreSQL. `ord` orders runs started in the same instant by
#: insertion, as SQLite's rowid does.
POSTGRES: tuple[str, ...] = (
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY, ord BIGSERIAL, started DOUBLE PRECISION NOT NULL, ended DOUBLE PRECISION,
        "user" TEXT, controller TEXT, command TEXT, cwd TEXT, playbook TEXT, git_commit TEXT,
        git_dirty INTEGER, inventory TEXT, extra_vars TEXT, schedule TEXT, exit_code INTEGER, recap TEXT,
        notes TEXT NOT NULL DEFAULT '[]'
    );
    CREATE INDEX runs_started ON runs(started);
    CREATE TABLE results (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, seq INTEGER NOT NULL,
        play TEXT, task TEXT, module TEXT, host TEXT, status TEXT, changed INTEGER, handler INTEGER,
        msg TEXT, diagnosis TEXT, duration DOUBLE PRECISION, PRIMARY KEY (run_id, seq)
    );
    CREATE INDEX results_host ON results(host);
    """,
    """
    ALTER TABLE runs ADD COLUMN heartbeat DOUBLE PRECISION;
    ALTER TABLE runs ADD COLUMN controller_pid INTEGER;
    ALTER TABLE runs ADD COLUMN controller_start BIGINT;
    ALTER TABLE runs ADD COLUMN controller_machine TEXT;
    ALTER TABLE runs ADD COLUMN current_task TEXT;
    CREATE INDEX results_run ON results(run_id, seq);
    """,
    """
    ALTER TABLE runs ADD COLUMN check_mode INTEGER;
    ALTER TABLE runs ADD COLUMN options TEXT;
    ALTER TABLE results ADD COLUMN log_tail TEXT;
    CREATE INDEX runs_schedule ON runs(schedule, started);
    CREATE TABLE run_hosts (
        host TEXT NOT NULL, run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        run_started DOUBLE PRECISION NOT NULL, PRIMARY KEY (host, run_id)
    );
    CREATE INDEX run_hosts_by_time ON run_hosts(host, run_started);
    """,
    """
    ALTER TABLE runs ADD COLUMN run_group TEXT;
    ALTER TABLE runs ADD COLUMN slice TEXT;
    CREATE INDEX runs_group ON runs(run_group, started);
    """,
    # IF NOT EXISTS: an older controller sharing the database may have set its version back
    """
    ALTER TABLE runs ADD COLUMN IF NOT EXISTS reason TEXT;
    ALTER TABLE runs ADD COLUMN IF NOT EXISTS outcome TEXT;
    """,
    """
    ALTER TABLE runs ADD COLUMN IF NOT EXISTS record_gap TEXT;
    """,
)

assert len(SQLITE) == len(POSTGRES), "one schema: every version exists on both backends"

VERSION = len(SQLITE)


def statements(script: str) -> list[str]:
    return [s for s in (part.strip() for part in script.split(";")) if s]
