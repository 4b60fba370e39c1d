"""Compose `vllm serve` for one model on one host: fit's numbers, the row's runtime hints (one merged
`--additional-config`), the 0.23 tutorials' baseline environment and the family table. Every choice keeps
its reason, because `--dry-run` prints them: a person must be able to check and copy the command.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ascend_setup.errors import BadInput
from ascend_setup.fit.config import text_config
from ascend_setup.fit.estimate import Fit
from ascend_setup.matrix.models import RuntimeHint
from ascend_setup.matrix.serve_hints import ADDITIONAL_CONFIG, deep_merge, merged_serve_args
from ascend_setup.serve.families import Family, ServeTable, load_table
from ascend_setup.serve.user_args import CONFIG, UserArgs, config_object, dest_of, read_command

EAGER = "--enforce-eager"
LOOPBACK = "127.0.0.1"


@dataclass
class Choice:
    """One environment variable or one argument group of the command, and why it is there."""

    words: List[str]
    why: str


@dataclass
class ServePlan:
    name: str
    model: str
    vllm: str  # the venv's vllm executable
    port: int
    cards: List[int]
    tp: int
    max_model_len: int
    concurrency: int
    families: List[str]
    plugin: str
    env: List[Choice] = field(default_factory=list)  # words: [NAME, VALUE]
    args: List[Choice] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    set_env: List[str] = field(default_factory=list)  # CANN's set_env.sh scripts the server runs with
    served_name: str = ""  # what readiness waits for: the first --served-model-name vLLM reads
    host: Optional[str] = None  # what vLLM binds (None: every interface)

    @property
    def argv(self) -> List[str]:
        return [self.vllm, "serve", self.model, *(w for c in self.args for w in c.words)]

    @property
    def environment(self) -> Dict[str, str]:
        return {c.words[0]: c.words[1] for c in self.env}

    @property
    def graph_mode(self) -> bool:
        return EAGER not in self.argv

    def script(self) -> List[str]:
        """The dry run: one item a line with its reason, as a bash script that runs as printed (the command is an
        array, so each argument can carry its comment)."""
        lines = [
            f"# {self.name}: {', '.join(self.families)} on card {','.join(map(str, self.cards))}, "
            f"vllm-ascend {self.plugin}"
        ]
        for script in self.set_env:  # the shell's options back as they were: the script may set -e, read unset
            # variables (so -u is off while it runs) and return non-zero (`|| true`: -e does not stop it there)
            lines.append(
                f"_opts=$(set +o); set +u; . {shlex.quote(script)} || true; eval \"$_opts\"  # CANN's "
                "environment, whatever set -u/-e it runs under"
            )
        lines += [f"export {c.words[0]}={shlex.quote(c.words[1])}  # {c.why}" for c in self.env]
        lines.append("serve=(")
        lines.append(f"  {shlex.quote(self.vllm)} serve {shlex.quote(self.model)}  # the install's venv; the model")
        lines += [f"  {' '.join(shlex.quote(w) for w in c.words)}  # {c.why}" for c in self.args]
        lines.append(")")
        lines.append('"${serve[@]}"')
        lines += [f"# note: {n}" for n in self.notes]
        return lines

    def to_json(self) -> Dict[str, Any]:
        return {**asdict(self), "argv": self.argv, "environment": self.environment, "graph_mode": self.graph_mode}


def _pairs(args: List[str]) -> List[List[str]]:
    """Hint arguments as flags, each with its value if it has one."""
    found: List[List[str]] = []
    i = 0
    while i < len(args):
        width = 2 if i + 1 < len(args) and not args[i + 1].startswith("--") else 1
        found.append(args[i : i + width])
        i += width
    return found


def largest_context(fit: Fit, concurrency: int) -> int:
    """The longest sequence the KV cache surely holds `concurrency` times over: fit's lower bound laid out in
    vLLM's blocks (a hybrid's state groups and padded pages counted), in whole blocks, less the one block vLLM's
    block pool keeps back as its null block (vllm/v1/core/block_pool.py)."""
    if not fit.fits or not fit.kv_bytes_per_token:
        return 0
    pool = fit.kv_pool
    return max(0, pool.largest_context(fit.kv_available_low_bytes, concurrency) - pool.block_size)


def choose_max_model_len(fit: Fit, config: Dict[str, Any], concurrency: int, given: Optional[int]) -> Tuple[int, str]:
    """(max-model-len, why); a given value the budget cannot hold is bad input naming the largest that fits."""
    limit = largest_context(fit, concurrency)
    model_max = int(text_config(config).get("max_position_embeddings") or 0)
    if given is not None:
        if given > limit:
            raise BadInput(
                f"--max-model-len {given} does not fit the KV budget at --concurrency {concurrency}: "
                f"the largest that fits is {limit}",
                hint="give a smaller one, or fewer sequences",
            )
        if model_max and given > model_max:
            raise BadInput(f"--max-model-len {given} is above the model's max_position_embeddings {model_max}")
        return given, "given"
    if limit <= 0:
        raise BadInput(
            f"the KV budget holds no sequence at --concurrency {concurrency} ({fit.headline})",
            hint="lower --concurrency, raise --gpu-memory-utilization, or use more cards (--tp)",
        )
    if model_max and model_max <= limit:
        return model_max, f"the model's own maximum (max_position_embeddings); the KV budget holds {limit}"
    return limit, (
        f"the largest context fit's lower bound holds at {concurrency} sequence(s) in whole "
        f"{fit.kv_pool.block_size}-token blocks less one (fit: {fit.kv_tokens:,} KV tokens, at least "
        f"{fit.kv_tokens_low:,}); the model's own {model_max or '?'} would fail KV sizing at start-up"
    )


def compose(
    *,
    name: str,
    model: Path,
    vllm: Path,
    fit: Fit,
    config: Dict[str, Any],
    found: List[str],
    families: List[Family],
    plugin: str,
    port: int,
    cards: List[int],
    max_model_len: int,
    why_len: str,
    concurrency: int,
    utilisation: float,
    user: UserArgs,
    unneeded: Sequence[RuntimeHint] = (),
    table: Optional[ServeTable] = None,
) -> ServePlan:
    """The plan; a setting the user gave after `--` replaces ours, and every `--additional-config` becomes one."""
    table = table or load_table()
    tp = len(cards)
    plan = ServePlan(
        name=name,
        model=str(model),
        vllm=str(vllm),
        port=port,
        cards=cards,
        tp=tp,
        max_model_len=max_model_len,
        concurrency=concurrency,
        families=[f.id for f in families] or found,
        plugin=plugin,
    )
    plan.env.append(
        Choice(
            ["ASCEND_RT_VISIBLE_DEVICES", ",".join(map(str, cards))],
            "the card(s) this server gets (checked free in npu-smi before the start)",
        )
    )
    for item in table.baseline.env + [e for f in families for e in f.env]:
        if item.applies(plugin, tp):
            plan.env.append(Choice([item.name, item.value], item.why))
    for var, value in fit.env.items():
        plan.env.append(Choice([var, value], "the row's runtime hint"))
    args = [
        Choice(["--served-model-name", name], "the name clients ask for (and serve status/stop use)"),
        Choice(
            ["--host", LOOPBACK],
            "loopback only: serve needs no more, and vLLM's default binds every "
            "interface with an API that asks for no key",
        ),
        Choice(["--port", str(port)], "free, checked before start"),
        Choice(["--max-model-len", str(max_model_len)], why_len),
        Choice(
            ["--gpu-memory-utilization", f"{utilisation:g}"],
            "share of HBM vLLM may take; fit's KV budget assumes the same",
        ),
    ]
    if tp > 1:
        args.append(Choice(["--tensor-parallel-size", str(tp)], f"--tp {tp}: weights and KV over {tp} cards"))
    for arg in table.baseline.args + [a for f in families for a in f.args]:
        if arg.applies(plugin, tp):
            args.append(Choice(list(arg.args), arg.why))
    heads = int(text_config(config).get("num_attention_heads") or 0) // tp
    for family in families:
        plan.notes += family.notes
        for rule in (r for r in family.eager if r.applies(plugin, tp)):
            if heads not in rule.unless_heads_per_card_in:
                args = [a for a in args if a.words[0] != "--compilation-config"]
                args.append(
                    Choice(
                        [EAGER],
                        f"{family.id}: {heads} attention heads per card is not in "
                        f"{rule.unless_heads_per_card_in} ({rule.why}); eager is slower, "
                        "measured as such",
                    )
                )
    args += [Choice(words, "the row's runtime hint") for words in _pairs(merged_serve_args(fit.serve_args))]
    plan.args = by_destination(args, user, unneeded)
    plan.notes += [
        f"the row's hint {h.id!r} is left out: it is needed only without Triton, and vLLM's HAS_TRITON "
        "is True in the venv"
        for h in unneeded
    ]
    parsed = read_command(plan.argv[2:])
    plan.served_name = (parsed.get("served_model_name") or [str(model)])[0]
    plan.host = parsed.get("host")
    plan.max_model_len = parsed.get("max_model_len") or max_model_len
    return plan


def _subtract(config: Dict[str, Any], hint: Dict[str, Any]) -> None:
    """Take out of `config` what `hint` set (the same value), and the sub-objects left empty."""
    for key, value in hint.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            _subtract(config[key], value)
            if not config[key]:
                del config[key]
        elif key in config and config[key] == value:
            del config[key]


def by_destination(args: List[Choice], user: UserArgs, unneeded: Sequence[RuntimeHint] = ()) -> List[Choice]:
    """Serve's choices as vLLM reads them: one per setting (the first), none the user's arguments after -- set in
    any spelling, every --additional-config merged into one (vLLM keeps only the last), then the user's own; the
    `unneeded` hints' settings left out."""
    kept: List[Choice] = []
    seen = set()
    config: Dict[str, Any] = {}
    drop = [list(w) for h in unneeded for w in _pairs(list(h.serve_args))]
    for choice in args:
        dest = dest_of(choice.words)
        if choice.words in drop and dest != CONFIG:
            continue
        if dest == CONFIG:
            deep_merge(config, config_object(json.loads(choice.words[1]), "of the row's hint"))
        elif dest not in seen and dest not in user.given:
            seen.add(dest)
            kept.append(choice)
    for words in drop:
        if words[0] == ADDITIONAL_CONFIG:
            _subtract(config, json.loads(words[1]))
    deep_merge(config, user.config)
    if config:
        why = (
            f"the row's hints and yours after --, merged into one (vLLM keeps only the last {ADDITIONAL_CONFIG})"
            if user.config
            else f"the row's runtime hints, merged into one (vLLM keeps only the last {ADDITIONAL_CONFIG})"
        )
        kept.append(Choice([ADDITIONAL_CONFIG, json.dumps(config)], why))
    rest = user.without_config()
    if rest:
        kept.append(Choice(rest, "given after --"))
    return kept
