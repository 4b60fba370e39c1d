"""The base of every --json document's model: its fields are all it holds, and a key the document has only
sometimes is left out when it has no value, rather than printed as null."""

from __future__ import annotations

from typing import Any, ClassVar, Dict, FrozenSet

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class Document(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: Keys printed only when set (not None): `hint` when there is one, a row's `target_arch`.
    ABSENT_WHEN_NONE: ClassVar[FrozenSet[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _leave_out_absent(self, handler: SerializerFunctionWrapHandler) -> Dict[str, Any]:
        data: Dict[str, Any] = handler(self)
        for key in self.ABSENT_WHEN_NONE:
            if data.get(key) is None:
                data.pop(key, None)
        return data
