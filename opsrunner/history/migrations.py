"""The history schema, one version at a time, for both backends.

Version N means the same tables and columns on SQLite and PostgreSQL; each entry moves the
schema one version up and is never edited once released. SQLite counts its version in
PRAGMA user_version (files written by earlier opsrunner versions migrate from there),
PostgreSQL in the table opsrunner_schema. The SQL of the stores is the same for both:
TEXT for JSON, INTEGER for flags, so one query reads either.

Controllers of different versions may share one database (docs/history.md, "Controllers of
different versions"). Beside the marker, each version applied is recorded in the table
opsrunner_schema_versions with the oldest schema version that can still use the database
(COMPATIBLE_FROM): opsrunner from before these were recorded (schema 4 to 6) sets the
PostgreSQL marker back to its own version whenever it opens a newer database, so the
schema's version is the highest of the marker and the versions recorded. This version never lowers either, never
re-applies a version recorded, and uses a newer schema that says it can, else refuses.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

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
    # 7: a failed task's output, the last lines of its stdout and stderr (a scheduled run's
    # console output goes nowhere): `show`, the dashboard and the alerts quote it.
    """
    ALTER TABLE results ADD COLUMN stdout_tail TEXT;
    ALTER TABLE results ADD COLUMN stderr_tail TEXT;
    """,
    # 8: the task an open run is in, beside its title (current_task): its module, its hosts and
    # what its module said it had done so far on each: the alert of a run whose controller was
    # killed in a rollback says the rollback was cut short, and what it had done.
    """
    ALTER TABLE runs ADD COLUMN in_flight TEXT;
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
    # (before the versions were recorded, this version was applied again); so must every
    # version from here on be.
    """
    ALTER TABLE runs ADD COLUMN IF NOT EXISTS reason TEXT;
    ALTER TABLE runs ADD COLUMN IF NOT EXISTS outcome TEXT;
    """,
    """
    ALTER TABLE runs ADD COLUMN IF NOT EXISTS record_gap TEXT;
    """,
    """
    ALTER TABLE results ADD COLUMN IF NOT EXISTS stdout_tail TEXT;
    ALTER TABLE results ADD COLUMN IF NOT EXISTS stderr_tail TEXT;
    """,
    """
    ALTER TABLE runs ADD COLUMN IF NOT EXISTS in_flight TEXT;
    """,
)

#: For each version, the oldest schema version whose code can still read and write a database
#: at that version. A version that code released before it can go on using unchanged (a
#: column it may leave empty, an index, a table it need not fill) keeps the value of the
#: version before it; any other change (a column it must fill, a table it must keep up to
#: date, a column renamed, dropped or meaning something else) sets its own number, and older
#: controllers then refuse the database instead of writing rows it cannot trust.
COMPATIBLE_FROM: tuple[int, ...] = (
    1,
    2,
    3,  # run_hosts: every writer fills it (the host filter reads it)
    4,  # PostgreSQL histories start here
    4,  # reason, outcome: empty in an older controller's rows, read as their exit codes say
    4,  # record_gap: empty in an older controller's rows
    4,  # stdout_tail, stderr_tail: empty in an older controller's task rows
    4,  # in_flight: empty in an older controller's rows (its killed runs' alerts say less)
)

assert len(SQLITE) == len(POSTGRES) == len(COMPATIBLE_FROM), "one schema: every version exists on both backends"
assert all(a <= b for a, b in itertools.pairwise(COMPATIBLE_FROM)), "never lowered"
assert all(c <= v for v, c in enumerate(COMPATIBLE_FROM, start=1)), "a version needs no newer code than itself"

VERSION = len(SQLITE)

#: The versions applied to a database, whoever applied them: opsrunner released before it
#: never writes this table, so it keeps the schema's version where the marker was set back.
VERSIONS_TABLE = "opsrunner_schema_versions"
SQLITE_VERSIONS_TABLE = f"""CREATE TABLE IF NOT EXISTS {VERSIONS_TABLE} (
    version INTEGER PRIMARY KEY, compatible_from INTEGER NOT NULL, recorded REAL NOT NULL)"""
POSTGRES_VERSIONS_TABLE = f"""CREATE TABLE IF NOT EXISTS {VERSIONS_TABLE} (
    version INTEGER PRIMARY KEY, compatible_from INTEGER NOT NULL, recorded DOUBLE PRECISION NOT NULL)"""
#: The newest version recorded and the oldest schema version that can use the database.
SELECT_RECORDED = f"SELECT max(version), max(compatible_from) FROM {VERSIONS_TABLE}"


@dataclass(frozen=True)
class Found:
    """What a database says of its schema."""

    #: The version marker (SQLite's user_version, PostgreSQL's opsrunner_schema): an older
    #: opsrunner may have set it back.
    marker: int
    #: The newest version recorded in opsrunner_schema_versions (0: none).
    recorded: int
    #: The oldest schema version that can use the database, as recorded (None: none recorded).
    needs: int | None

    @property
    def version(self) -> int:
        """The schema's version: a version recorded was applied, whatever the marker says."""
        return max(self.marker, self.recorded)

    def refusal(self) -> str | None:
        """Why this opsrunner cannot use the database; None where it can: its own version or
        an older one (migrated when opened for writing), or a newer one that says code of
        this version can still read and write it."""
        if self.version <= VERSION:
            return None
        if self.recorded < self.version or self.needs is None:
            return (f"schema version {self.version} is newer than this opsrunner's ({VERSION}) and no version "
                    f"recorded says whether schema {VERSION} can use it: upgrade opsrunner")
        if self.needs > VERSION:
            return (f"schema version {self.version} needs opsrunner of schema version {self.needs} or later; this "
                    f"opsrunner's is {VERSION}: upgrade opsrunner")
        return None

    def missing(self) -> range:
        """The versions of this opsrunner's not recorded yet (applied now, or before the
        versions were recorded)."""
        return range(self.recorded + 1, VERSION + 1)


def statements(script: str) -> list[str]:
    return [s for s in (part.strip() for part in script.split(";")) if s]
