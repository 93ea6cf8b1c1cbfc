"""Query/path parameter types shared by the routers.

Bounds keep every value inside what the databases accept (a 32-bit id, a bounded offset,
no NUL byte in text, which Postgres rejects), so bad input is a 422, never a 500."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

MAX_ID = 2**31 - 1
NO_NUL = r"^[^\x00]*$"

RunId = Annotated[int, Path(ge=1, le=MAX_ID, description="Run id")]
BreakageId = Annotated[int, Path(ge=1, le=MAX_ID, description="Breakage id")]
Limit = Annotated[int, Query(ge=1, le=500, description="Page size")]
Offset = Annotated[int, Query(ge=0, le=10_000_000, description="Rows to skip")]
Cursor = Annotated[
    int | None,
    Query(ge=1, le=MAX_ID, description="Keyset pagination: next_cursor of the previous page"),
]
TextFilter = Annotated[str | None, Query(max_length=1000, pattern=NO_NUL)]
