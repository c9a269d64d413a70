"""Scheduled redeploys: calendar specs, systemd units / cron entries, schedule files, runs and alerts."""
