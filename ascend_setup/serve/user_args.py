"""The arguments a user gives `serve` after `--`, read as vLLM 0.23.0 will read them (serve/vllm_args.py over the
real parser's flags), whatever the spelling: `--served_model_name`, `--served-model`, `--additional_config`,
`--additional-config.key=value`. Serve's own settings given there are refused; an unknown flag is refused with
vLLM's own message, before anything starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence

from ascend_setup.errors import BadInput
from ascend_setup.fit.profile import Serving
from ascend_setup.serve.flag_table import serve_flags
from ascend_setup.serve.vllm_args import ServeArgsError, given_dests, parse_serve, without

CONFIG = "additional_config"
#: What serve itself must set to reach and run the server: given after --, it would be out of serve's sight.
SERVES_OWN = {
    "port": "give serve's own --port",
    "tensor_parallel_size": "give serve's own --tp",
    "model": "give serve's MODEL",
    "model_tag": "give serve's MODEL (after -- it is not a vLLM flag)",
    "config": "give its flags after -- instead (serve checks what it can read)",
}


def vllm_says(exc: ServeArgsError, where: str) -> BadInput:
    return BadInput(f"{where}: {exc}", hint="vllm serve would exit 2 on it; 'vllm serve --help=all' lists its flags")


def settings(args: Sequence[str], where: str = "after --") -> Dict[str, Any]:
    """Destination -> value for what `args` set (vLLM's message as BadInput for what it would refuse)."""
    try:
        return given_dests(serve_flags(), list(args))
    except ServeArgsError as exc:
        raise vllm_says(exc, where) from None


def config_object(value: Any, where: str) -> Dict[str, Any]:
    """`--additional-config` must be a JSON object (vLLM's parser also lets text or a list through; its config
    check then fails at start-up, minutes later)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadInput(
            f"--additional-config {where} is {str(value)[:60]!r}, not a JSON object",
            hint="give --additional-config '{\"key\": value}'",
        )
    return value


@dataclass
class UserArgs:
    """The user's arguments after --, and what they set."""

    args: List[str] = field(default_factory=list)
    given: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, args: Sequence[str]) -> UserArgs:
        given = settings(args)
        for dest, why in SERVES_OWN.items():
            if dest in given:
                name = "a MODEL" if dest == "model_tag" else "--" + dest.replace("_", "-")
                raise BadInput(f"{name} after -- is serve's to set: {why}")
        config_object(given.get(CONFIG), "after --")
        return cls(list(args), given)

    @property
    def config(self) -> Dict[str, Any]:
        return config_object(self.given.get(CONFIG), "after --")

    def serving(self) -> Serving:
        """The flags given here that change the memory vLLM profiles (fit's KV budget), else vLLM's defaults."""
        default = Serving()
        return Serving(
            int(self.given.get("max_num_batched_tokens") or default.max_num_batched_tokens),
            int(self.given.get("max_num_seqs") or default.max_num_seqs),
            bool(self.given.get("enforce_eager", default.enforce_eager)),
        )

    def without_config(self) -> List[str]:
        """The arguments as vLLM reads them, with every --additional-config (any spelling) taken out: serve merges
        it with the row's hints into one."""
        return without(serve_flags(), self.args, CONFIG)[0]


def read_command(argv: Sequence[str]) -> Dict[str, Any]:
    """The namespace of the whole composed `vllm serve MODEL ...` (argv after `serve`), as vLLM will read it."""
    try:
        return vars(parse_serve(serve_flags(), list(argv)))
    except ServeArgsError as exc:
        raise vllm_says(exc, "the composed command") from None


def dest_of(words: Sequence[str]) -> str:
    """The destination one of serve's own choices (canonical flag words) sets."""
    return next(iter(settings(words, where="serve's own choice")))
