"""Ids and timestamps the store hands out; ids are checked before they go into a filter or a folder name."""

import re
import uuid
from datetime import UTC, datetime

from prisma_core.errors import NotFoundError

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,80}$")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_id(prefix: str) -> str:
    return f"{prefix}-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


def check_id(value: str) -> str:
    """Ids go into filters and folder names: only our own lowercase slug format is accepted."""
    if not ID_PATTERN.match(value):
        raise NotFoundError(f"{value!r} is not a valid Prisma id.")
    return value
