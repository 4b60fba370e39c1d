"""Each host learns its own decode speed: every `serve` measurement is a point in the user's cache, and `fit`
refits the card's decode model on them.

Why: the card's terms come from two measurements on one 910B3; another host's bandwidth, driver, row or TP
changes them. One point of a model's size can only move eta; points of two sizes or more split both terms.
A point far from the model (eager mode, a host-bound run) would drag the line: it is kept and shown, not used.

The file, `<cache>/speed/points.json` (`$XDG_CACHE_HOME` or `~/.cache`, then `ascend-setup`), is written whole
and atomically under an flock; a file we cannot read is bad input and is never overwritten.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Iterator, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from typing_extensions import Annotated

from ascend_setup.errors import BadInput
from ascend_setup.fit.cards import DecodeModel, card_key
from ascend_setup.fit.decode import Prediction, Terms, adjust_eta, predict, solve
from ascend_setup.utils.files import atomic_write_text, make_dir, open_nofollow
from ascend_setup.utils.inputs import load_json
from ascend_setup.utils.paths import cache_dir as default_cache_dir

#: A point further than this factor from the card's model (either way) is set aside, not fitted.
FAR = 2.0
#: Points whose bytes per token differ by less than this factor are one size: they cannot split the terms.
DISTINCT_SIZES = 1.2
HINT = "move the file away (ascend-setup never overwrites a file it cannot read), then measure again with serve"

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class SpeedPoint(BaseModel):
    """One single-stream decode measurement on this host. bytes_per_token is what one card reads per token
    (fit/decode.py bytes_per_token, with the context and TP of the run)."""

    model_config = ConfigDict(extra="forbid")

    card: Annotated[str, Field(min_length=1, max_length=64)]
    cann: Annotated[str, Field(min_length=1, max_length=64)]  # the compat-matrix row
    tp: Annotated[int, Field(strict=True, ge=1, le=64)]
    graph_mode: bool  # False when served with --enforce-eager
    model: Annotated[str, Field(min_length=1, max_length=1000)]
    bytes_per_token: Annotated[float, Field(gt=0, le=1e13, allow_inf_nan=False)]
    tok_s: Annotated[float, Field(gt=0, le=100_000, allow_inf_nan=False)]
    measured_at: str  # ISO 8601, UTC

    @field_validator("measured_at")
    @classmethod
    def _utc(cls, value: str) -> str:
        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError("not an ISO 8601 time") from None
        offset = when.utcoffset()
        if offset is None or offset.total_seconds() != 0:
            raise ValueError("not a UTC time (needs +00:00 or Z)")
        return value


class PointsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    points: List[SpeedPoint] = Field(default_factory=list)


def now_utc() -> str:
    """The time to stamp a point with: ISO 8601 in UTC, to the second."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def points_path(cache_dir: Optional[Path] = None) -> Path:
    """`<cache_dir>/speed/points.json`; cache_dir defaults to the tool's cache ($XDG_CACHE_HOME/ascend-setup)."""
    return (cache_dir or default_cache_dir()) / "speed" / "points.json"


def _load(path: Path) -> List[SpeedPoint]:
    if not path.exists() and not path.is_symlink():
        return []
    data = load_json(path, "speed", follow=False, hint=HINT)
    try:
        return PointsFile.model_validate(data).points
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "?"
        raise BadInput(
            f"speed measurements file {path} is corrupt: {where}: {first['msg'].lower()}", hint=HINT
        ) from None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One writer at a time (serve on two cards may record at once); readers need no lock (atomic rename)."""
    make_dir(path.parent)
    fd = open_nofollow(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write(path: Path, points: List[SpeedPoint]) -> None:
    atomic_write_text(path, json.dumps(PointsFile(points=points).model_dump(), indent=2) + "\n")


def record_point(point: SpeedPoint, cache_dir: Optional[Path] = None) -> Path:
    """Append one measurement; returns the file. A file already there that cannot be read raises BadInput
    and stays as it is."""
    path = points_path(cache_dir)
    with _locked(path):
        _write(path, _load(path) + [point])
    return path


def load_points(card: str, cache_dir: Optional[Path] = None) -> List[SpeedPoint]:
    """This host's measurements on `card` (any spelling: Ascend910B3, 910b3), oldest first."""
    return [p for p in _load(points_path(cache_dir)) if card_key(p.card) == card_key(card)]


def forget_points(card: str, cache_dir: Optional[Path] = None) -> int:
    """Remove this host's measurements on `card`; returns how many. Other cards' points stay."""
    path = points_path(cache_dir)
    if not path.exists() and not path.is_symlink():
        return 0
    with _locked(path):
        points = _load(path)
        kept = [p for p in points if card_key(p.card) != card_key(card)]
        if len(kept) != len(points):
            _write(path, kept)
    return len(points) - len(kept)


@dataclass
class Judged:
    """A point beside what the card's model predicts for it; `why` says why it is not used ('' when used)."""

    point: SpeedPoint
    predicted: Prediction
    used: bool
    why: str
    bound: str  # 'launch' or 'bandwidth': what limits the measured speed

    def to_json(self) -> Dict[str, Any]:
        return {
            **self.point.model_dump(),
            "predicted_tok_s": round(self.predicted.tok_s, 2),
            "used": self.used,
            "why": self.why,
            "bound": self.bound,
        }


def judge(
    point: SpeedPoint,
    model: DecodeModel,
    bandwidth_gbps: float,
    *,
    tp: Optional[int] = None,
    cann: Optional[str] = None,
) -> Judged:
    """What the card's model predicts for a measurement, whether the measurement is launch-bound, and whether a
    fit for `tp` and row `cann` (None: any) may use it."""
    predicted = predict(model.terms(point.tp), point.bytes_per_token, bandwidth_gbps)
    slower = predicted.tok_s / point.tok_s
    far_below = slower > FAR
    launch = (far_below and not point.graph_mode) or (point.tp > 1 and predicted.bound == "launch")
    why = ""
    if cann is not None and point.cann != cann:
        why = f"measured on the CANN {point.cann} row; this fit is for the {cann} row"
    elif tp is not None and point.tp != tp:
        why = f"measured at TP {point.tp}; this fit is for TP {tp} (the per-token fixed cost differs)"
    elif not point.graph_mode:
        why = (
            f"measured with --enforce-eager (the model says {predicted.tok_s:.1f} tok/s in graph mode)"
            + (": launch-bound, not bandwidth-bound" if far_below else "")
            + "; fit predicts graph mode"
        )
    elif far_below:
        why = (
            f"{slower:.1f}x below the model's {predicted.tok_s:.1f} tok/s: bound elsewhere than bandwidth (host or "
            "launch overhead: low AICore use in npu-smi, or an eager run recorded as graph mode)"
        )
    elif slower < 1 / FAR:
        why = (
            f"{1 / slower:.1f}x above the model's {predicted.tok_s:.1f} tok/s: were its bytes per token counted "
            "as fit counts them?"
        )
    return Judged(point, predicted, not why, why, "launch" if launch else "bandwidth")


@dataclass
class Calibration:
    terms: Terms
    method: str  # 'card' (the card's terms), 'eta' (eta adjusted), 'both' (both terms refitted)
    source: str  # the line fit prints after 'speed: '
    points: List[Judged]


def calibrate(
    points: List[SpeedPoint], model: DecodeModel, bandwidth_gbps: float, *, tp: int, cann: Optional[str]
) -> Calibration:
    """The decode terms for this host: both refitted from usable points of two sizes or more, else eta
    adjusted from one size, else the card's. Each point is returned judged."""
    judged = [judge(p, model, bandwidth_gbps, tp=tp, cann=cann) for p in points]
    base = model.terms(tp)
    usable = [j for j in judged if j.used]
    sizes = [j.point.bytes_per_token for j in usable]
    fallback = ""
    if len(usable) >= 2 and max(sizes) >= DISTINCT_SIZES * min(sizes):
        terms = solve([(j.point.bytes_per_token, j.point.tok_s) for j in usable], bandwidth_gbps)
        if terms.t_fixed_s >= 0 and math.isfinite(terms.eta) and terms.eta > 0:
            return Calibration(
                terms,
                "both",
                f"calibrated on this host from {len(usable)} measurements (eta and "
                "t_fixed by least squares)" + _set_aside(judged),
                judged,
            )
        fallback = "; the least-squares line gave a negative fixed cost, so only eta moved"
    for j in usable:
        if 1 / j.point.tok_s <= base.t_fixed_s:
            j.used, j.why = False, f"faster than the card's fixed cost alone allows ({base.t_fixed_s * 1000:.2f} ms)"
    usable = [j for j in judged if j.used]
    if usable:
        terms = adjust_eta(base, [(j.point.bytes_per_token, j.point.tok_s) for j in usable], bandwidth_gbps)
        n = len(usable)
        return Calibration(
            terms,
            "eta",
            f"calibrated on this host from {n} measurement{'s' if n > 1 else ''} (eta "
            f"adjusted, t_fixed kept from the card{'' if fallback else ': one model size'})"
            + fallback
            + _set_aside(judged),
            judged,
        )
    return Calibration(base, "card", f"the card's decode model ({model.source})" + _set_aside(judged), judged)


def _set_aside(judged: List[Judged]) -> str:
    unused = sum(not j.used for j in judged)
    return (
        f"; {unused} host measurement{'s' if unused > 1 else ''} kept but not used (see calibration)" if unused else ""
    )
