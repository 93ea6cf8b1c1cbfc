"""Column types whose values pass the storage mask (``service.secrets.storage_mask``) as
they are written: every column that may carry text from a run (failure messages and
decisive lines, captured output, node ids, reasons, summaries, titles, outbox payloads
such as PR comment bodies and commit status descriptions).

Why a column type and not a call in each writer: SQLAlchemy applies a type's
``process_bind_param`` to every value bound to that column, from ORM flushes and Core
``insert``/``update`` statements (the outbox and upserts write through Core) alike. A
writer added later cannot forget it, and no reader ever serves what was not masked, since
every page and API answer reads these rows. The DDL is the underlying type's: no
migration. Step logs are masked earlier, line by line as they are written
(``workers/pipeline/logs``), because they are stored compressed.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, String, Text
from sqlalchemy.types import TypeDecorator

from service.secrets import mask_json, storage_mask


class MaskedText(TypeDecorator[str]):
    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Any) -> str | None:
        return storage_mask(value) if value else value


class MaskedString(TypeDecorator[str]):
    """``MaskedString(1000)``: a VARCHAR whose values are masked."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Any) -> str | None:
        return storage_mask(value) if value else value


class MaskedJSON(TypeDecorator[Any]):
    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        return mask_json(value)
