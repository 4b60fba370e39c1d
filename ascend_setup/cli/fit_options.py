"""The options two commands share, as model fields beside the flags that set them (`flags.fit_flags`,
`flags.hub`): `fit` and `model fetch` both fit a model to a card, and both read a model id from a hub."""

from __future__ import annotations

from typing import Literal, Optional, Tuple

from ascend_setup.cli.command import Options


class FitFlagOptions(Options):
    """`flags.fit_flags`: the card and the serving settings a fit is made for."""

    card: str = "910B3"
    hbm_gib: Optional[float] = None
    bandwidth: Optional[float] = None
    context: int = 32768
    gpu_memory_utilization: float = 0.9
    kv_dtype: Literal["bf16", "fp16", "int8"] = "bf16"
    tp: int = 1
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 256
    enforce_eager: bool = False
    vllm_ascend: Optional[Tuple[int, int]] = None
    cann: Optional[str] = None
    workdir: Optional[str] = None


class HubOptions(Options):
    """`flags.hub`: which hub a model id is read from."""

    source: Optional[Literal["modelscope", "huggingface"]] = None
    revision: Optional[str] = None
    endpoint: Optional[str] = None
    refresh: bool = False
