"""The published start-up figures of ../shared/fit-referee, and `fit` run on each as a user would: the row's card,
TP, utilisation, context and serve flags, the model's config.json, and (where the log printed the weights) a
safetensors header of exactly that size. Used by tests/functional/test_fit_referee.py and by the manual's table
(docs/hooks.py), so both show the same figures.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parents[2]
#: CI keeps a copy of shared/ beside the clone.
REFEREE = REPO.parent / "shared" / "fit-referee"
KINDS = ("kv_cache_tokens", "max_concurrency", "weights_gib")
#: Single-stream speeds: the decode model is judged on them, not held to a bound (it was fitted on two of them).
SPEEDS = ("decode_tok_s_single", "tpot_ms_single")
#: The rows the card's decode terms were fitted on (data/cards.yaml a2-graph, and its eager term).
FITTED_ON = ("seed-vl8b-dec-graph", "seed-vl8b-dec-eager", "seed-q38-dec")
#: The goal, the issue's: KV and concurrency within -5%..+2% of what vLLM printed; weights within 3%.
KV_BOUNDS, WEIGHTS_BOUND = (-0.05, 0.02), 0.03
GIB = 1024**3
#: vLLM's LLM class profiles 8192 tokens where `vllm serve` profiles 2048 (vllm/engine/arg_utils.py).
LLM_CLASS_TOKENS = 8192


@dataclass
class Row:
    id: str
    model: str
    card: str
    tp: int
    utilisation: float
    context: int
    kind: str
    value: float
    version: str
    conditions: str
    config_file: str
    quant: str
    group_weights_gib: Optional[float]  # the same run's "Loading model weights took" figure, per card
    visible_gib: Optional[float]  # a device-visible figure the row states for an unnamed card
    utilisation_published: bool = True  # False: the source does not show it, vLLM's default 0.9 is assumed

    @property
    def utilisation_shown(self) -> str:
        return f"{self.utilisation:g}" if self.utilisation_published else f"{self.utilisation:g} (not shown: assumed)"

    @property
    def card_name(self) -> str:
        """The fit card: the row's own, a 910B4 when it says so, an A3 die, else a 64 GB 910B."""
        return "910B4" if "910B4" in self.card else "910C" if "A3" in self.card else "910B3"

    @property
    def card_args(self) -> List[str]:
        """An A3 die is not in the card table: 64 GB and the A2's bandwidth, as a user would have to give them."""
        return ["--hbm-gib", "64", "--bandwidth", "1490"] if self.card_name == "910C" else []

    @property
    def batched_tokens(self) -> int:
        found = re.search(r"max[-_]num[-_]batched[-_]tokens[ =](\d+)", self.conditions)
        if found:
            return int(found.group(1))
        return LLM_CLASS_TOKENS if "LLM(model" in self.conditions else 2048

    @property
    def max_seqs(self) -> int:
        found = re.search(r"--max-num-seqs[ =](\d+)", self.conditions)
        return int(found.group(1)) if found else 256

    @property
    def eager(self) -> bool:
        return bool(re.search(r"(?<!not )--enforce-eager", self.conditions)) or "enforce_eager=True" in self.conditions

    @property
    def release(self) -> Optional[str]:
        """The vllm-ascend release of the run, for fit's --vllm-ascend (its memory accounting): the one named, else
        the vLLM release it pairs with, else the one a pre-release build came before; None for a dev build named
        by date only (fit's default)."""
        found = (
            re.search(r"vllm-ascend (\d+\.\d+\.\d+(?:rc\d+)?)", self.version)
            or re.search(r"vLLM (\d+\.\d+\.\d+)", self.version)
            or re.search(r"pre-v(\d+\.\d+\.\d+)", self.version)
        )
        return found.group(1) if found else None

    @property
    def prints_block_tokens(self) -> bool:
        """vLLM before 0.23 printed blocks x block size as its KV cache size; 0.23 and the May-2026 dev build
        print concurrency x context."""
        found = re.search(r"vLLM (\d+)\.(\d+)", self.version) or re.search(r"vllm-ascend (\d+)\.(\d+)", self.version)
        if found:
            return (int(found.group(1)), int(found.group(2))) < (0, 23)
        return "2026" not in self.version


def _number(text: str) -> Optional[float]:
    found = re.match(r"\s*([0-9.]+)", text or "")
    return float(found.group(1)) if found else None


def rows(referee: Path = REFEREE, kinds: tuple = KINDS) -> List[Row]:
    """Every row of `kinds` (the memory figures by default), with its run's weights figure."""
    with (referee / "MEASUREMENTS.tsv").open(newline="", encoding="utf-8") as handle:
        table = list(csv.DictReader(handle, delimiter="\t"))
    weights = {r["id"].rsplit("-", 1)[0]: float(r["value"]) for r in table if r["kind"] == "weights_gib"}
    out = []
    for r in table:
        if r["kind"] not in kinds:
            continue
        visible = re.search(r"([0-9.]+) GiB device-visible", r["card"])
        out.append(
            Row(
                r["id"],
                r["model"],
                r["card"],
                int(r["tp"]),
                _number(r["gpu_memory_utilization"]) or 0.9,
                int(_number(r["max_model_len"]) or 0),
                r["kind"],
                float(r["value"]),
                r["version"],
                r["conditions"],
                r["config_file"],
                r["quant"],
                weights.get(r["id"].rsplit("-", 1)[0]),
                float(visible.group(1)) if visible else None,
                bool(r["gpu_memory_utilization"].strip()),
            )
        )
    return out


def write_header_only(path: Path, nbytes: int) -> None:
    """A safetensors file whose header declares `nbytes` of BF16 weights; the data is a hole (a sparse file)."""
    header = {
        "__metadata__": {"format": "pt"},
        "model.weights": {"dtype": "BF16", "shape": [nbytes // 2], "data_offsets": [0, nbytes // 2 * 2]},
    }
    blob = json.dumps(header).encode()
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(blob)) + blob)
        handle.truncate(8 + len(blob) + nbytes // 2 * 2)


def model_dir(row: Row, where: Path, referee: Path = REFEREE) -> Path:
    """The model as the user of that run had it: config.json; the published weights as a header where the
    log printed them (the weights row itself is fit from config.json alone); ModelSlim's description for W8A8."""
    model = where / row.id
    model.mkdir(parents=True)
    shutil.copyfile(referee / "configs" / row.config_file, model / "config.json")
    if row.group_weights_gib and row.kind != "weights_gib":
        write_header_only(model / "model.safetensors", int(row.group_weights_gib * GIB * row.tp))
    if row.quant.lower().startswith("w8a8"):
        (model / "quant_model_description.json").write_text(json.dumps({"model_quant_type": "W8A8_DYNAMIC"}))
    return model


def fit_args(row: Row, model: Path, workdir: Path) -> List[str]:
    args = [
        "fit",
        str(model),
        "--json",
        "--card",
        row.card_name,
        *row.card_args,
        "--tp",
        str(row.tp),
        "--gpu-memory-utilization",
        f"{row.utilisation:g}",
        "--context",
        str(row.context),
        "--max-num-batched-tokens",
        str(row.batched_tokens),
        "--max-num-seqs",
        str(row.max_seqs),
        "--workdir",
        str(workdir),
        "--no-calibration",
    ]
    if row.visible_gib:  # the row's unnamed card: its own figure, as `probe` records it on that host
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "probe.json").write_text(
            json.dumps({"device": "npu:0", "gbps": 1490.0, "total_memory": int(row.visible_gib * GIB)})
        )
    args += ["--vllm-ascend", row.release] if row.release else []
    return args + (["--enforce-eager"] if row.eager else [])


def figure(row: Row, fit: Dict) -> float:
    """fit's figure for the row's kind, as that run's vLLM printed it."""
    if row.kind == "weights_gib":
        return fit["weights_per_card_bytes"] / GIB
    if row.kind == "max_concurrency":
        return fit["concurrency"]
    if row.kind in SPEEDS:
        speed = fit["decode_tok_s"] or 0.0
        return 1000 / speed if row.kind == "tpot_ms_single" and speed else speed
    return fit["kv_block_tokens"] if row.prints_block_tokens else fit["kv_tokens"]


def within(row: Row, error: float) -> bool:
    if row.kind == "weights_gib":
        return abs(error) <= WEIGHTS_BOUND
    return KV_BOUNDS[0] <= error <= KV_BOUNDS[1]


@dataclass
class Result:
    row: Row
    fit: Optional[Dict]  # fit's JSON, None when it gave no estimate
    said: str  # fit's one line when it gave none
    estimate: Optional[float] = None
    error: Optional[float] = None


def run(row: Row, where: Path, env: Dict[str, str], referee: Path = REFEREE) -> Result:
    model = model_dir(row, where, referee)
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_setup", *fit_args(row, model, where / f"{row.id}-wd")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    data = json.loads(proc.stdout) if proc.stdout.strip() else {}
    if proc.returncode == 2 or "kv_tokens" not in data:
        return Result(row, None, (proc.stderr.strip().splitlines() or ["?"])[-1])
    if row.kind in SPEEDS and not data.get("decode_tok_s"):
        return Result(row, data, "no estimate: " + data["headline"].split(": ", 1)[-1])
    estimate = figure(row, data)
    return Result(row, data, "", estimate, estimate / row.value - 1)


def _shown(kind: str, value: float) -> str:
    return (
        f"{value:,.0f}"
        if kind == "kv_cache_tokens"
        else f"{value:,.2f}"
        if kind == "max_concurrency"
        else f"{value:.2f} GiB"
    )


def table(results: List[Result]) -> List[str]:
    """The published figures against fit, one Markdown row each."""
    lines = [
        "| row | model | card, TP, util, context | kind | published | fit | error | in bounds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        row = r.row
        head = (
            f"| {row.id} | {row.model} | {row.card_name}, TP{row.tp}, {row.utilisation_shown}, {row.context:,} | "
            f"{row.kind} | {_shown(row.kind, row.value)} |"
        )
        if r.estimate is None or r.error is None:
            said = r.said.split("no estimate: ", 1)[-1].split(" (hint:")[0].replace("|", "/")
            lines.append(f"{head} no estimate | {said} | no |")
        else:
            held = "yes" if within(row, r.error) else "no"
            lines.append(f"{head} {_shown(row.kind, r.estimate)} | {r.error:+.1%} | {held} |")
    return lines


def speed_table(results: List[Result]) -> List[str]:
    """The single-stream speeds against the decode model and its eager figure, saying which ones it was fitted on."""
    lines = [
        "| row | model | card, TP | kind | published | fit | error | eager | |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        row = r.row
        unit = "ms" if row.kind == "tpot_ms_single" else "tok/s"
        said = (
            "fitted on it"
            if row.id in FITTED_ON
            else (row.card_name + ": 64 GB and 1490 GB/s assumed" if row.card_args else "")
        )
        if r.estimate is None or r.error is None or r.fit is None:
            why = r.said.split("no estimate: ", 1)[-1].split(" (hint:")[0].replace("|", "/")
            lines.append(
                f"| {row.id} | {row.model} | {row.card_name}, TP{row.tp} | {row.kind} | {row.value:g} {unit} "
                f"| no estimate | | | {why} |"
            )
        else:
            eager = r.fit["decode_tok_s_eager"] or 0.0
            eager_shown = f"{1000 / eager:.1f} ms" if unit == "ms" and eager else f"{eager:.1f} tok/s"
            lines.append(
                f"| {row.id} | {row.model} | {row.card_name}, TP{row.tp} | {row.kind} | {row.value:g} {unit} "
                f"| {r.estimate:.1f} {unit} | {r.error:+.0%} | {eager_shown} | {said} |"
            )
    return lines


def run_all(env: Dict[str, str], referee: Path = REFEREE, kinds: tuple = KINDS) -> List[Result]:
    with tempfile.TemporaryDirectory() as where:
        return [run(row, Path(where), env, referee) for row in rows(referee, kinds)]
