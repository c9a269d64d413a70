"""How many ssh worker processes a run starts (sshworkers.py): pure rules."""

from __future__ import annotations

from opsrunner.sshworkers import auto_workers, workers_wanted


def test_auto_keeps_one_process_on_few_cores_or_few_hosts() -> None:
    assert auto_workers(ssh_hosts=500, cores=2) == 0  # measured: one process is faster there
    assert auto_workers(ssh_hosts=15, cores=64) == 0
    assert auto_workers(ssh_hosts=16, cores=16) == 2
    assert auto_workers(ssh_hosts=50, cores=16) == 8  # the best of 2, 4 and 8 measured at 50 hosts on 16 cores
    assert auto_workers(ssh_hosts=500, cores=16) == 8  # at most half the cores


def test_the_flag_wins_over_the_environment_and_bad_values_name_their_source() -> None:
    assert workers_wanted(3, {"OPSRUNNER_SSH_WORKERS": "5"}) == (3, None)
    assert workers_wanted(None, {"OPSRUNNER_SSH_WORKERS": " 5 "}) == (5, None)
    assert workers_wanted(None, {}) == (None, None)
    assert workers_wanted(0, {}) == (0, None)
    count, problem = workers_wanted(None, {"OPSRUNNER_SSH_WORKERS": "-2"})
    assert count is None and problem is not None and problem.key_path == "OPSRUNNER_SSH_WORKERS"


def test_the_seed_is_started_only_for_a_play_likely_to_want_workers() -> None:
    from opsrunner.connections.workerseed import likely_wanted

    assert likely_wanted(["play", "pb.yml"], {}, cores=16, min_cores=8)
    assert not likely_wanted(["play", "pb.yml"], {}, cores=2, min_cores=8)  # the 2-core default: none
    assert likely_wanted(["play", "pb.yml", "--ssh-workers", "2"], {}, cores=2, min_cores=8)
    assert likely_wanted(["play", "pb.yml", "--ssh-workers=2"], {}, cores=2, min_cores=8)
    assert not likely_wanted(["play", "pb.yml", "--ssh-workers=0"], {}, cores=16, min_cores=8)
    assert not likely_wanted(["play", "pb.yml"], {"OPSRUNNER_SSH_WORKERS": "0"}, cores=16, min_cores=8)
    assert likely_wanted(["play", "pb.yml"], {"OPSRUNNER_SSH_WORKERS": "4"}, cores=2, min_cores=8)
    assert not likely_wanted(["play", "pb.yml", "--ssh-workers", "many"], {}, cores=16, min_cores=8)
    for words in (["play", "pb.yml", "--list-hosts"], ["play", "--help"], ["check", "pb.yml"], ["history"], []):
        assert not likely_wanted(words, {}, cores=16, min_cores=8), words
