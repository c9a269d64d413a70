"""opsrunner: declarative restarts of long-running jobs over ssh and container exec hops."""

__version__ = "0.1.0"
