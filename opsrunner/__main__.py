from opsrunner.cli import run

run()
