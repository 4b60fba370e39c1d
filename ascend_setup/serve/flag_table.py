"""The flags of vLLM 0.23.0's `vllm serve` (data/vllm_serve_flags.json, generated from the real parser by
dev/vllm_serve_flags.py; the live test regenerates it from the vLLM 0.23.0 wheel and compares), validated."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ascend_setup.errors import BadInput
from ascend_setup.utils.inputs import load_json

TABLE = Path(__file__).resolve().parent.parent / "data" / "vllm_serve_flags.json"


class Flag(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    options: List[str]
    dest: str = Field(min_length=1)
    action: Literal[
        "store", "store_true", "store_false", "store_const", "append", "count", "help", "version", "boolean_optional"
    ]
    nargs: Union[int, Literal["?", "*", "+"], None]
    const: Any = None
    type: Literal["str", "int", "float", "json", "json_or_str", "human_int", "human_int_or_auto"]
    optional: bool
    choices: Optional[List[str]]
    default: Any = None


class FlagTable(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str
    vllm: str
    python: str
    flags: List[Flag] = Field(min_length=1)


@lru_cache(maxsize=None)
def serve_flags(path: Path = TABLE) -> List[Dict[str, Any]]:
    """The flags as the parser (serve/vllm_args.py) takes them."""
    try:
        table = FlagTable.model_validate(load_json(path, "vllm-flags"))
    except ValidationError as exc:
        raise BadInput(f"vLLM flag table {path}: {' '.join(str(exc).split())[:300]}") from None
    return [f.model_dump() for f in table.flags]
