"""The wall-clock time ampbench writes: UTC, ISO 8601 (no torch, so result readers can use it)."""
from __future__ import annotations

import datetime


def now_utc(timespec: str = "seconds") -> str:
    """Now in UTC, e.g. 2026-11-24T04:55:01+00:00 (`timespec` as datetime.isoformat's)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec=timespec)
