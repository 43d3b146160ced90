"""CLI commands that live in their own modules (loaded lazily by cake_core.cli)."""
