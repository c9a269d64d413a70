"""Run every ported case under ansible-playbook and opsrunner and say, per case, SAME or DIFF.

    python tests/ansible_ports/side_by_side.py [--ansible /tmp/ansible_parity/bin] [--record] [NAME...]

--record writes ansible-core's outcomes to expected.json (what test_ports.py compares with).
What is compared and normalised: see portcases.py's docstring."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.ansible_ports.portcases import (
    DELIBERATE,
    NOT_YET,
    Outcome,
    load_cases,
    load_expected,
    run_ansible,
    run_opsrunner,
    save_expected,
)


def _show(label: str, outcome: Outcome) -> str:
    return f"    {label:9} rc={outcome.rc} recap={outcome.recap} debug={outcome.debug}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ansible", default="/tmp/ansible_parity/bin", help="folder holding ansible-playbook")
    parser.add_argument("--record", action="store_true", help="write ansible-core's outcomes to expected.json")
    parser.add_argument("--recorded", action="store_true",
                        help="compare with expected.json instead of running ansible-playbook")
    parser.add_argument("names", nargs="*", help="only these cases")
    opts = parser.parse_args(argv)
    cases = [c for c in load_cases() if not opts.names or c.name in opts.names]
    recorded = load_expected()
    same = 0
    with tempfile.TemporaryDirectory(prefix="opsrunner-ports-") as top:
        for case in cases:
            ours = run_opsrunner(case, Path(top) / case.name / "opsrunner")
            if opts.recorded:
                theirs = recorded[case.name]
            else:
                theirs = run_ansible(case, Path(top) / case.name / "ansible", Path(opts.ansible))
            recorded[case.name] = theirs
            verdict = "SAME" if ours == theirs else "DIFF"
            same += verdict == "SAME"
            note = f"  (deliberate: {DELIBERATE[case.name]})" if case.name in DELIBERATE else \
                f"  (not yet: {NOT_YET[case.name]})" if case.name in NOT_YET else ""
            print(f"{verdict} {case.area:14} {case.name}{note}", flush=True)
            if verdict == "DIFF":
                print(_show("ansible", theirs))
                print(_show("opsrunner", ours))
    print(f"{same}/{len(cases)} cases behave as ansible-core does")
    if opts.record:
        names = {c.name for c in load_cases()}
        save_expected({n: o for n, o in recorded.items() if n in names})
    return 0 if same == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
