"""A verdict for each level of a sweep (issue 51): the measured TPOT (each user's time per token) against three
references, each named:

- fit: the batch decode model (fit/batch.py) for this model, card and TP at the level's concurrency and the
  sweep's lengths, on the card's terms (data/cards.yaml), as serve compares its single stream with fit; known when
  the server is one `serve` started (its record names the model's directory, serve's result its card and TP), or
  a --url server given --model-dir and --card (and --tp);
- published: figures others measured on the same model, card, TP and concurrency, at lengths within 2x
  (data/bench_published.yaml, from ../shared/fit-referee);
- calibration: this host's earlier sweeps of the same server command, model and lengths (<workdir>/bench/); for a
  --url server, of the same URL, model and lengths.

Each says "as predicted" when the measured per-user speed is within TOLERANCE of the reference's, else "slower
than predicted" (then with the reasons bench found) or "faster than predicted". The level's verdict is the first
reference that is known, in that order.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import yaml
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import Annotated

from ascend_setup.bench.reasons import TpOption, TpStep, settings
from ascend_setup.errors import BadInput
from ascend_setup.fit.batch import mean_context, step
from ascend_setup.fit.cards import card_for
from ascend_setup.fit.decode import bytes_per_token
from ascend_setup.fit.estimate import check_tp, probed_bandwidth
from ascend_setup.fit.model_files import load_config, local_files, weights
from ascend_setup.serve import server_records as records
from ascend_setup.utils.files import atomic_write_text, make_dir
from ascend_setup.utils.inputs import Name, Prose, check_yaml_shape, load_model, read_input_text, validate

#: Within this share of a reference's speed a level is "as predicted". Why 15%: the one-factor decode model was
#: 8-9% off the field report's two measurements in opposite directions (fit/decode.py), and three published runs
#: of one setup spread 5% (Qwen2.5-Omni-7B at 20, TPOT 24.55-25.88 ms: pr12560, pr12609, pr13592).
TOLERANCE = 0.15
#: Published lengths match within this factor (TPOT grows with the context read, throughput with the output).
LENGTH_FACTOR = 2.0
PUBLISHED = Path(__file__).resolve().parent.parent / "data" / "bench_published.yaml"
HINT = "the published figures ship with ascend-setup: reinstall it"
#: The earlier runs read: the newest this many.
MAX_RUNS = 50

Positive = Annotated[float, Field(strict=True, gt=0, le=1e7, allow_inf_nan=False)]
Count = Annotated[int, Field(strict=True, ge=1, le=1 << 20)]


class Figure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: Name
    source: Prose
    model: Name
    card: Name
    tp: Annotated[int, Field(strict=True, ge=1, le=64)]
    concurrency: Count
    input_len: Optional[Count] = None
    output_len: Optional[Count] = None
    output_tok_s: Optional[Positive] = None
    tpot_ms: Positive
    note: Optional[Prose] = None


class Published(BaseModel):
    model_config = ConfigDict(extra="forbid")

    figures: List[Figure] = Field(max_length=10_000)


class ServeResult(BaseModel):
    """What bench reads of serve's <workdir>/serve/<name>.json (the rest is serve's)."""

    model_config = ConfigDict(extra="ignore")

    card: Name
    tp: Annotated[int, Field(strict=True, ge=1, le=64)]


class RunLevel(BaseModel):
    model_config = ConfigDict(extra="ignore")

    concurrency: Count
    tpot_ms: Positive


class Run(BaseModel):
    """One earlier sweep of this host (<workdir>/bench/<time>.json)."""

    model_config = ConfigDict(extra="ignore")

    model: Name
    command: Prose
    url: Optional[Prose] = None  # the server's URL (a --url sweep's key, with the model)
    input_len: Count
    output_len: Count
    measured_at: Annotated[float, Field(strict=True, ge=0, le=1e11)]
    levels: List[RunLevel] = Field(max_length=4096)


def load_published(path: Path = PUBLISHED) -> Published:
    text = read_input_text(path, "published", what=f"published bench figures {path}", hint=HINT)
    check_yaml_shape(text, f"published bench figures {path}", hint=HINT)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise BadInput(f"published bench figures {path} is not valid YAML", hint=HINT) from None
    return validate(Published, data, f"published bench figures {path}", hint=HINT)


@lru_cache(maxsize=1)
def published() -> Published:
    return load_published()


@dataclass
class Context:
    """What bench knows of the server: its model's directory, card and TP (from serve), and its command."""

    model: str  # the served name
    command: str
    model_dir: Optional[Path] = None
    card: Optional[str] = None
    tp: int = 1
    bandwidth_gbps: Optional[float] = None
    tp_from: str = "serve's record"  # where the TP came from when the command does not say
    url: str = ""  # the server's base URL: a --url sweep's calibration key (with the served name)
    why_no_fit: str = "a bare URL: bench cannot know the model's files, card or TP (give a NAME serve started)"


def context_of(workdir: Optional[Path], name: Optional[str], served: str, command: str) -> Context:
    """The server's facts, from serve's record and result when bench was given a NAME."""
    ctx = Context(served, command)
    if workdir is None or name is None:
        return ctx
    record = records.load(records.record_path(workdir, name))
    argv = list(record.argv)
    result_path = records.serve_dir(workdir) / f"{name}.json"
    if len(argv) < 3 or not (Path(argv[2]) / "config.json").is_file():
        ctx.why_no_fit = f"serve's record of {name} names no model directory with a config.json"
        return ctx
    if not result_path.is_file():
        ctx.why_no_fit = f"serve's result {result_path} is missing (its card and TP)"
        return ctx
    result = load_model(result_path, "serve-result", ServeResult, follow=False)
    ctx.model_dir, ctx.card, ctx.tp = Path(argv[2]), result.card, result.tp
    ctx.bandwidth_gbps = probed_bandwidth(workdir)
    return ctx


def url_context(served: str, url: str, model_dir: Optional[Path], card: Optional[str], tp: Optional[int]) -> Context:
    """The facts of a --url server as the user gave them (--model-dir, --card, --tp): fit's figure needs the model's
    directory and the card; the bandwidth is the card table's (this host's probe need not be the server's)."""
    ctx = Context(served, "", model_dir=model_dir, card=card, tp=tp or 1, tp_from="--tp", url=url)
    if model_dir is not None:
        check_tp(load_config(model_dir), ctx.tp)  # before the sweep: a --tp the heads do not divide is bad input
    if model_dir is None or card is None:
        ctx.model_dir = None  # the card alone still matches published figures (with the TP)
        ctx.why_no_fit = (
            "a bare URL: give --model-dir (the served model's directory, with its config.json) and "
            "--card (and --tp when it serves on more than one card) for fit's figure"
        )
    return ctx


@dataclass
class Reference:
    name: str  # fit, published, calibration
    what: str  # which: the model and its source, a published row's id and source, the runs compared with
    tpot_ms: Optional[float]  # the reference's TPOT at this level (None: not known, `what` says why)
    output_tok_s: Optional[float] = None
    verdict: Optional[str] = None
    ratio: Optional[float] = None  # measured per-user speed / the reference's
    eager_tpot_ms: Optional[float] = None  # fit's: the same step under --enforce-eager (bench/reasons.py's evidence)

    def to_json(self) -> Dict[str, Any]:
        out = {
            "reference": self.name,
            "what": self.what,
            "tpot_ms": self.tpot_ms,
            "output_tok_s": self.output_tok_s,
            "verdict": self.verdict,
            "ratio": self.ratio,
        }
        return {**out, "eager_tpot_ms": self.eager_tpot_ms} if self.eager_tpot_ms is not None else out


@dataclass
class LevelVerdict:
    concurrency: int
    verdict: str
    against: Optional[str]
    references: List[Reference]
    reasons: List[str] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "verdict": self.verdict,
            "against": self.against,
            "references": [r.to_json() for r in self.references],
            "reasons": self.reasons,
        }


def word(ratio: float) -> str:
    if ratio < 1 - TOLERANCE:
        return "slower than predicted"
    if ratio > 1 + TOLERANCE:
        return "faster than predicted"
    return "as predicted"


def judged(ref: Reference, measured_tpot_ms: float) -> Reference:
    if ref.tpot_ms:
        ref.ratio = round(ref.tpot_ms / measured_tpot_ms, 3)
        ref.verdict = word(ref.ratio)
    return ref


def fit_reference(ctx: Context, concurrency: int, input_len: int, output_len: int, measured_ttft_s: float) -> Reference:
    """fit's batch model at this concurrency; its throughput with the level's measured TTFT (fit has no prefill
    model): c x output / (TTFT + (output - 1) x TPOT)."""
    if ctx.model_dir is None or ctx.card is None:
        return Reference("fit", ctx.why_no_fit, None)
    card = card_for(ctx.card)
    bandwidth = ctx.bandwidth_gbps or card.peak_gbps
    files = local_files(ctx.model_dir)
    s = step(
        card.decode.terms(ctx.tp),
        files,
        concurrency=concurrency,
        context=mean_context(input_len, output_len),
        bandwidth_gbps=bandwidth,
        tp=ctx.tp,
    )
    eager = step(
        card.decode.eager_terms(ctx.tp),
        files,
        concurrency=concurrency,
        context=mean_context(input_len, output_len),
        bandwidth_gbps=bandwidth,
        tp=ctx.tp,
    )
    latency = measured_ttft_s + (output_len - 1) * s.seconds
    what = (
        f"fit's batch decode model for {ctx.model_dir.name} on {'an' if ctx.tp == 1 else str(ctx.tp) + ' x'} "
        f"{card.name} ({card.decode_name}: eta {card.decode.eta:g}, t_fixed "
        f"{card.decode.terms(ctx.tp).t_fixed_s * 1000:g} ms; {bandwidth:g} GB/s"
        f"{' probed' if ctx.bandwidth_gbps else ''}) at {mean_context(input_len, output_len)} tokens of context: "
        f"{s.fixed_s * 1000:.2f} fixed + {s.weights_s * 1000:.2f} weights + {s.kv_s * 1000:.2f} KV ms a step"
    )
    return Reference(
        "fit",
        what,
        round(s.tpot_ms, 3),
        round(concurrency * output_len / latency, 2),
        eager_tpot_ms=round(eager.tpot_ms, 3),
    )


#: vLLM's default --gpu-memory-utilization: the share of a card's memory a server takes when its command says none.
UTILISATION = 0.9


def tp_steps(ctx: Context, concurrencies: Sequence[int], input_len: int, output_len: int) -> List[TpStep]:
    """fit's batch step at each level at the server's TP (its command's --tensor-parallel-size in any spelling
    vLLM reads, else the context's TP: serve's record or --tp) and at each smaller TP the model's heads divide by,
    with what one card holds there (the weights and each sequence's KV at its full length) against one card's
    memory x the command's --gpu-memory-utilization: bench/reasons.py's tp-wider-than-needed. [] at TP 1 or
    without fit's facts (a bare URL)."""
    given = settings(ctx.command.split())
    said = given.get("tensor_parallel_size")
    tp = said if isinstance(said, int) and said > 0 else ctx.tp
    if ctx.model_dir is None or ctx.card is None or tp <= 1:
        return []
    card = card_for(ctx.card)
    bandwidth = ctx.bandwidth_gbps or card.peak_gbps
    files = local_files(ctx.model_dir)
    total = weights(files).total_bytes
    share = given.get("gpu_memory_utilization")
    capacity = card.visible_bytes * (share if isinstance(share, float) and 0 < share <= 1 else UTILISATION)
    smaller = []
    for t in range(1, tp):
        try:
            check_tp(files.config, t)
        except BadInput:
            continue
        smaller.append(t)
    out = []
    for c in concurrencies:
        at = step(
            card.decode.terms(tp),
            files,
            concurrency=c,
            context=mean_context(input_len, output_len),
            bandwidth_gbps=bandwidth,
            tp=tp,
        )
        options = []
        for t in smaller:
            s = step(
                card.decode.terms(t),
                files,
                concurrency=c,
                context=mean_context(input_len, output_len),
                bandwidth_gbps=bandwidth,
                tp=t,
            )
            kv = bytes_per_token(files, context=input_len + output_len, tp=t) - weights(files).per_token_bytes / t
            options.append(TpOption(t, round(s.tpot_ms, 3), total / t + c * kv))
        out.append(
            TpStep(
                c,
                tp,
                round(at.fixed_s * 1000, 3),
                round(at.tpot_ms, 3),
                options,
                capacity,
                "the server's command" if tp == said else ctx.tp_from,
            )
        )
    return out


def _same_model(a: str, b: str) -> bool:
    return a.rstrip("/").rsplit("/", 1)[-1].lower() == b.rstrip("/").rsplit("/", 1)[-1].lower()


def _near(stated: Optional[int], asked: int) -> bool:
    return stated is None or 1 / LENGTH_FACTOR <= asked / stated <= LENGTH_FACTOR


def published_references(
    ctx: Context, concurrency: int, input_len: int, output_len: int, figures: Optional[Sequence[Figure]] = None
) -> List[Reference]:
    names = [ctx.model] + ([ctx.model_dir.name] if ctx.model_dir else [])
    rows = [
        f
        for f in (published().figures if figures is None else figures)
        if any(_same_model(f.model, n) for n in names)
        and ctx.card is not None
        and f.card.upper() == ctx.card.upper()
        and f.tp == ctx.tp
        and f.concurrency == concurrency
        and _near(f.input_len, input_len)
        and _near(f.output_len, output_len)
    ]
    return [
        Reference("published", f"{f.id}: {f.source}" + (f"; {f.note}" if f.note else ""), f.tpot_ms, f.output_tok_s)
        for f in rows
    ]


def runs_dir(workdir: Path) -> Path:
    return workdir / "bench"


def earlier_runs(workdir: Optional[Path]) -> List[Run]:
    """This host's saved sweeps, newest first (at most MAX_RUNS); a damaged one is bad input, as every file."""
    if workdir is None or not runs_dir(workdir).is_dir():
        return []
    paths = sorted(runs_dir(workdir).glob("*.json"), reverse=True)[:MAX_RUNS]
    return [load_model(p, "bench-run", Run, follow=False) for p in paths]


def calibration_reference(
    runs: Sequence[Run], ctx: Context, concurrency: int, input_len: int, output_len: int
) -> Reference:
    tpots = [
        lv.tpot_ms
        for r in runs
        if r.model == ctx.model
        and r.command == ctx.command
        and (ctx.command or r.url == ctx.url)
        and r.input_len == input_len
        and r.output_len == output_len
        for lv in r.levels
        if lv.concurrency == concurrency
    ]
    if not tpots:
        return Reference(
            "calibration", "no earlier sweep of this server, model and lengths at this concurrency here", None
        )
    return Reference(
        "calibration",
        f"this host's earlier sweeps: the median of {len(tpots)} at this concurrency",
        round(statistics.median(tpots), 3),
    )


def verdicts(
    ctx: Context,
    levels: Sequence[Dict[str, Any]],
    input_len: int,
    output_len: int,
    runs: Sequence[Run],
    reasons: Sequence[Any],
) -> List[LevelVerdict]:
    """Each level (bench's level rows) judged against each reference; `reasons` (bench/reasons.py) go with a
    level whose gap they can explain (their effect and levels)."""
    done = []
    for lv in levels:
        c, tpot = lv["concurrency"], lv["tpot_ms"]
        refs = [
            fit_reference(ctx, c, input_len, output_len, lv["ttft_s"]),
            *published_references(ctx, c, input_len, output_len),
            calibration_reference(runs, ctx, c, input_len, output_len),
        ]
        refs = [judged(r, tpot) for r in refs]
        first = next((r for r in refs if r.verdict), None)
        verdict = first.verdict if first and first.verdict else "no reference"
        said = [f"{r.rule}: {r.evidence}" for r in reasons if r.concerns(c, verdict)]
        if verdict.startswith("slower") and not said:
            said = ["no reason found in the server's command line, log or /metrics"]
        done.append(LevelVerdict(c, verdict, first.name if first else None, refs, said))
    return done


def save_run(workdir: Path, ctx: Context, input_len: int, output_len: int, levels: Sequence[Dict[str, Any]]) -> Path:
    """This sweep, for the next one's calibration reference."""
    make_dir(runs_dir(workdir))
    now = time.time()
    path = runs_dir(workdir) / f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(now))}-{int(now * 1e6) % 10**6:06d}.json"
    data = {
        "model": ctx.model,
        "command": ctx.command,
        "url": ctx.url or None,
        "input_len": input_len,
        "output_len": output_len,
        "measured_at": now,
        "levels": [
            {"concurrency": lv["concurrency"], "tpot_ms": lv["tpot_ms"], "output_tok_s": lv["output_tok_s"]}
            for lv in levels
            if lv["tpot_ms"] > 0
        ],
    }
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")
    return path


def lines(found: Sequence[LevelVerdict]) -> List[str]:
    """The verdicts in prose: one line per level, then each reference named once."""
    out = []
    for v in found:
        parts = [f"{r.name} {r.tpot_ms:g} ms ({r.ratio:.2f}x)" for r in v.references if r.tpot_ms and r.ratio]
        out.append(
            f"concurrency {v.concurrency}: {v.verdict}"
            + (f" against {v.against}" if v.against else "")
            + (f" (TPOT against {', '.join(parts)}, within {TOLERANCE:.0%} is as predicted)" if parts else "")
            + ("; " + "; ".join(v.reasons) if v.reasons else "")
        )
    named: Dict[str, str] = {}
    for v in found:
        for r in v.references:
            named.setdefault(f"{r.name}: {r.what.split(' at ')[0] if r.name == 'fit' else r.what}", "")
    return out + [f"reference {k}" for k in named]


def fit_figures(
    ctx: Context, levels: Sequence[Dict[str, Any]], input_len: int, output_len: int
) -> Dict[int, Reference]:
    """fit's reference at each level (concurrency -> it), graph and eager TPOT: evidence for bench/reasons.py."""
    return {
        lv["concurrency"]: fit_reference(ctx, lv["concurrency"], input_len, output_len, lv["ttft_s"]) for lv in levels
    }


def judge_sweep(
    workdir: Optional[Path],
    name: Optional[str],
    served: str,
    command: str,
    input_len: int,
    output_len: int,
    levels: Sequence[Dict[str, Any]],
    reasons: Sequence[Any],
    ctx: Optional[Context] = None,
) -> List[LevelVerdict]:
    """bench's hook: the verdicts, against the runs saved before this one; then this one saved (when bench knows
    the workdir: a NAME serve started)."""
    ctx = ctx or context_of(workdir, name, served, command)
    found = verdicts(ctx, levels, input_len, output_len, earlier_runs(workdir), reasons)
    if workdir is not None:
        save_run(workdir, ctx, input_len, output_len, levels)
    return found
