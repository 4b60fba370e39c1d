"""A fit as a command line asks for it (`fit`, and `model fetch`, which fits before it downloads): the card the
flags name, this host's probe and measurements, the matrix row, then fit's estimate.

The commands pass their options model; what this room reads of it is `FitFlags`, so the room stays below the
front door and a test can pass any object that carries the same names."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Protocol, Tuple

from ascend_setup.errors import BadInput
from ascend_setup.fit.calibration import Calibration, calibrate, forget_points, load_points, points_path
from ascend_setup.fit.cards import Card, card_for, with_in_use, with_visible
from ascend_setup.fit.estimate import Fit, estimate, probed_bandwidth, probed_in_use, probed_memory
from ascend_setup.fit.model_files import ModelFiles, local_files
from ascend_setup.fit.profile import Serving
from ascend_setup.host.cann import primary_cann, row_for
from ascend_setup.matrix import load_matrix
from ascend_setup.matrix.models import Row
from ascend_setup.utils.paths import CANN_HOME, cache_dir, check_path_length, resolve_workdir


class FitFlags(Protocol):
    """The flags of `cli.flags.fit_flags` (and --matrix), as a fit reads them."""

    @property
    def card(self) -> str: ...
    @property
    def hbm_gib(self) -> Optional[float]: ...
    @property
    def bandwidth(self) -> Optional[float]: ...
    @property
    def context(self) -> int: ...
    @property
    def gpu_memory_utilization(self) -> float: ...
    @property
    def kv_dtype(self) -> str: ...
    @property
    def tp(self) -> int: ...
    @property
    def max_num_batched_tokens(self) -> int: ...
    @property
    def max_num_seqs(self) -> int: ...
    @property
    def enforce_eager(self) -> bool: ...
    @property
    def vllm_ascend(self) -> Optional[Tuple[int, int]]: ...
    @property
    def cann(self) -> Optional[str]: ...
    @property
    def workdir(self) -> Optional[str]: ...
    @property
    def matrix(self) -> Optional[Path]: ...


class HubFlags(Protocol):
    """The flags of `cli.flags.hub`: which hub a model id is read from."""

    @property
    def source(self) -> Optional[str]: ...
    @property
    def revision(self) -> Optional[str]: ...
    @property
    def endpoint(self) -> Optional[str]: ...
    @property
    def refresh(self) -> bool: ...


def model_files(model: str, hub: HubFlags) -> Tuple[ModelFiles, object]:
    """(the model's files, the hub listing or None): a local path when it exists, else a hub id."""
    from ascend_setup.hub.base import MODEL_ID, check_model_id

    path = Path(model).expanduser()
    check_path_length(path.absolute(), "MODEL")
    if path.exists() or not MODEL_ID.match(model):
        if not path.exists():
            raise BadInput(
                f"MODEL {path.absolute()} does not exist",
                hint="a model directory (config.json, *.safetensors), its config.json, or a hub id",
            )
        return local_files(path.absolute()), None
    from ascend_setup.hub.remote import remote_files
    from ascend_setup.index.pipconfig import trust_for_this_run

    check_endpoint(hub)
    trust_for_this_run()
    return remote_files(
        check_model_id(model),
        source=hub.source,
        revision=hub.revision,
        endpoint_url=hub.endpoint,
        cache=cache_dir(),
        refresh=hub.refresh,
    )


def check_endpoint(hub: HubFlags) -> None:
    """--endpoint is one hub's address: it needs --source."""
    if hub.endpoint and not hub.source:
        raise BadInput("--endpoint needs --source modelscope or --source huggingface (it is one hub's address)")


def card_of_flags(flags: FitFlags) -> Card:
    """The card the flags name (their ranges are the parser's: cli.flags.fit_flags)."""
    return card_for(flags.card, flags.hbm_gib, flags.bandwidth)


def fit_row(flags: FitFlags) -> Row:
    """--cann's row, else the installed CANN's, else the newest (as doctor and mirrors choose)."""
    matrix = str(flags.matrix) if flags.matrix is not None else None
    return row_for(load_matrix(matrix), flags.cann, primary_cann(CANN_HOME.value(None)[0]))


def host_calibration(flags: FitFlags, card: Card, bandwidth: Optional[float], cann: str) -> Calibration:
    """This host's measurements on the card, judged against the card's model at the fit's bandwidth (the card's
    when none is given) and fitted (the card's terms when there are none)."""
    return calibrate(load_points(card.name), card.decode, bandwidth or card.peak_gbps, tp=flags.tp, cann=cann)


def bandwidth_of(flags: FitFlags) -> Tuple[Optional[float], str]:
    """(the bandwidth a fit uses, where from): --bandwidth, else an NPU probe here, else the card table's."""
    probed = probed_bandwidth(resolve_workdir(flags.workdir, mode="read"))
    return (flags.bandwidth, "flag") if flags.bandwidth else (probed, "probe") if probed else (None, "card-table")


def serving_of(flags: FitFlags) -> Serving:
    serving = Serving(flags.max_num_batched_tokens, flags.max_num_seqs, flags.enforce_eager)
    if flags.vllm_ascend:
        serving.vllm_ascend = flags.vllm_ascend
    return serving


def with_probed_memory(flags: FitFlags, card: Card) -> Card:
    """The card with this host's own device-visible memory, and what a new process found in use on it, when
    `probe` recorded them (and --hbm-gib is not given)."""
    where = resolve_workdir(flags.workdir, mode="read")
    total = None if flags.hbm_gib else probed_memory(where)
    if not total:
        return card
    card = with_visible(card, total, "this host: torch_npu total memory recorded by 'ascend-setup probe'")
    in_use = probed_in_use(where, total)
    if in_use is None:
        return card
    return with_in_use(card, in_use, "this host: torch_npu total - free memory when 'ascend-setup probe' started")


def fit_model(flags: FitFlags, files: ModelFiles, card: Card, *, use_calibration: bool = True) -> Fit:
    card = with_probed_memory(flags, card)
    bandwidth, source = bandwidth_of(flags)
    row = fit_row(flags)
    calibration = host_calibration(flags, card, bandwidth, row.cann) if use_calibration else None
    return estimate(
        files,
        card,
        row,
        context=flags.context,
        utilisation=flags.gpu_memory_utilization,
        kv_dtype=flags.kv_dtype,
        bandwidth=bandwidth,
        bandwidth_source=source,
        tp=flags.tp,
        calibration=calibration,
        serving=serving_of(flags),
    )


def forget(card: Card) -> Dict[str, Any]:
    """`fit --calibration --forget`: this host's measurements on the card removed; how many, and from where."""
    return {"card": card.name, "forgotten": forget_points(card.name), "file": str(points_path())}


def calibration_summary(flags: FitFlags, card: Card) -> Tuple[Dict[str, Any], Calibration]:
    """`fit --calibration`: this host's measurements on the card, each judged, and the terms they give."""
    bandwidth, _ = bandwidth_of(flags)
    row = fit_row(flags)
    calibration = host_calibration(flags, card, bandwidth, row.cann)
    summary = {
        "card": card.name,
        "file": str(points_path()),
        "tp": flags.tp,
        "cann": row.cann,
        "method": calibration.method,
        "speed_source": calibration.source,
        "eta": round(calibration.terms.eta, 4),
        "t_fixed_ms": round(calibration.terms.t_fixed_s * 1000, 3),
        "points": [j.to_json() for j in calibration.points],
    }
    return summary, calibration
