"""Run history: every `opsrunner play` recorded in an embedded SQLite database."""
