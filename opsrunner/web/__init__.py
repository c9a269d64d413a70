"""`opsrunner serve`: a read-only web dashboard over the run history and the schedules."""
