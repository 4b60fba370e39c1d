"""Everything `serve MODEL` learns before it starts anything, as data: the model, the workdir and venv, CANN and
its environment, the cards, the matrix row, what the venv holds.

The reading is done by `gather`, in steps (`HostSteps`) that a test replaces one by one: serve's planning,
validation and refusals can then be tested on a context built without the host (no npu-smi, no set_env.sh,
no venv to run)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from ascend_setup.errors import BadInput
from ascend_setup.fit.cards import Card, card_for
from ascend_setup.fit.estimate import probed_bandwidth
from ascend_setup.fit.model_files import ModelFiles, local_files
from ascend_setup.host.cann import CannInstall, primary_cann, row_for
from ascend_setup.host.npu import NpuFacts, host_npu
from ascend_setup.matrix.models import Row
from ascend_setup.serve.start_checks import VenvFacts
from ascend_setup.utils.paths import CANN_HOME, VENV, check_path_length, resolve_workdir

DEFAULT_CARD = "910B3"


class ServeSettings(Protocol):
    """`serve MODEL`'s flags, as serve reads them."""

    @property
    def model(self) -> str: ...
    @property
    def vllm_args(self) -> Sequence[str]: ...
    @property
    def workdir(self) -> Optional[str]: ...
    @property
    def venv(self) -> Optional[str]: ...
    @property
    def cann_home(self) -> Optional[str]: ...
    @property
    def matrix(self) -> Optional[Path]: ...
    @property
    def port(self) -> int: ...
    @property
    def tp(self) -> Optional[int]: ...
    @property
    def card(self) -> Optional[str]: ...
    @property
    def max_model_len(self) -> Optional[int]: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def gpu_memory_utilization(self) -> float: ...
    @property
    def ready_timeout(self) -> Optional[float]: ...
    @property
    def measure_tokens(self) -> int: ...
    @property
    def dry_run(self) -> bool: ...
    @property
    def detach(self) -> bool: ...


def model_dir(model: str) -> Path:
    """A local directory, or where `model fetch` put a hub id."""
    from ascend_setup.hub.base import MODEL_ID
    from ascend_setup.hub.fetch import default_dest

    path = Path(model).expanduser()
    check_path_length(path.absolute(), "MODEL")
    if not path.exists() and MODEL_ID.match(model):
        path = default_dest(model)
        if not path.exists():
            raise BadInput(
                f"MODEL {model} has not been fetched (not in {path})",
                hint=f"'ascend-setup model fetch {model}' first, or give the model's directory",
            )
    if not path.is_dir():
        raise BadInput(f"MODEL {path.absolute()} is not a model directory", hint="give the directory of config.json")
    if not (path / "config.json").is_file():
        raise BadInput(f"MODEL {path.absolute()} has no config.json", hint="give the directory of a model's files")
    return path.absolute()


def server_name(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", path.name).strip("-.") or "model"


def choose_cards(card: Optional[str], tp: Optional[int], present: Optional[int]) -> List[int]:
    """--card N[,M...], else the first --tp cards; more than the host has is bad input."""
    if card:
        try:
            cards = [int(c) for c in card.split(",")]
        except ValueError:
            raise BadInput(f"--card {card!r} is not a card index or a list of them (0 or 0,1)") from None
        if len(set(cards)) != len(cards) or min(cards) < 0:
            raise BadInput(f"--card {card!r} names a card twice or a negative index")
        if tp is not None and tp != len(cards):
            raise BadInput(f"--tp {tp} and --card {card} disagree: one card per tensor-parallel rank")
    else:
        cards = list(range(tp or 1))
    if present is not None and (len(cards) > present or max(cards) >= present):
        raise BadInput(
            f"{'--tp ' + str(len(cards)) if not card else '--card ' + card} asks for more cards "
            f"than npu-smi shows here ({present})"
        )
    return cards


def card_of(chips: List[Dict[str, str]]) -> Tuple[Card, str]:
    """fit's card for the chip npu-smi names; the 910B3's figures, said so, when it names none fit knows."""
    name = chips[0]["name"] if chips else None
    if name:
        try:
            return card_for(name), f"npu-smi: {name}"
        except BadInput:
            pass
    return card_for(DEFAULT_CARD), f"the card is {name or 'unknown (no npu-smi)'}: {DEFAULT_CARD} figures assumed"


def cann_environment(cann: Optional[CannInstall]) -> Dict[str, str]:
    """The environment the server runs in: CANN's set_env.sh applied, else this one's."""
    from ascend_setup.host.setenv import capture_env

    return capture_env(cann.set_env_scripts()).apply() if cann and cann.set_env else dict(os.environ)


def matrix_row(matrix: Optional[Path], cann: Optional[CannInstall]) -> Row:
    """The installed CANN's row of the matrix, else the newest."""
    from ascend_setup.matrix import load_matrix

    return row_for(load_matrix(str(matrix) if matrix is not None else None), None, cann)


def read_venv(venv: Path, env: Mapping[str, str]) -> Optional[VenvFacts]:
    """What the venv holds (versions, the plugin's source, HAS_TRITON), read by its own Python; None when it is
    not a working venv."""
    from ascend_setup.dists.venv_reader import read_pyvenv_cfg, venv_python
    from ascend_setup.serve.start_checks import venv_facts

    if read_pyvenv_cfg(venv) is not None and venv_python(venv).exists():
        return venv_facts(venv_python(venv), env)
    return None


def default_venv(workdir: Path) -> Path:
    from ascend_setup.engine.workdir import Workdir

    return Workdir(workdir).venv


@dataclass(frozen=True)
class HostSteps:
    """The host I/O of `gather`, one step each; a test replaces any of them (dataclasses.replace)."""

    model_files: Callable[[Path], ModelFiles] = local_files
    cann: Callable[[Optional[str]], Optional[CannInstall]] = primary_cann
    environment: Callable[[Optional[CannInstall]], Dict[str, str]] = cann_environment
    npu: Callable[[Optional[str]], NpuFacts] = host_npu
    row: Callable[[Optional[Path], Optional[CannInstall]], Row] = matrix_row
    venv: Callable[[Path, Mapping[str, str]], Optional[VenvFacts]] = read_venv
    bandwidth: Callable[[Path], Optional[float]] = probed_bandwidth


@dataclass
class Context:
    """Everything serve learns before it starts anything."""

    settings: ServeSettings
    model: Path
    name: str
    files: ModelFiles
    workdir: Path
    venv: Path
    cann: Optional[CannInstall]
    env: Dict[str, str]
    npu: NpuFacts
    cards: List[int]
    card: Card
    card_source: str
    row: Row
    facts: Optional[VenvFacts]
    plugin: str
    bandwidth: Optional[float] = None  # this host's probed HBM bandwidth ('ascend-setup probe'), when measured
    set_env: List[str] = field(default_factory=list)  # CANN's set_env.sh scripts the server runs with


def gather(settings: ServeSettings, steps: HostSteps = HostSteps()) -> Context:
    """Read the host for `serve MODEL`: bad input (a model that is not one, more cards than npu-smi shows, no
    working venv outside a dry run) before anything starts."""
    model = model_dir(settings.model)
    files = steps.model_files(model)
    workdir = resolve_workdir(settings.workdir, mode="read" if settings.dry_run else "write")
    venv = VENV.path(settings.venv)[0] or default_venv(workdir)
    cann_home = CANN_HOME.value(settings.cann_home)[0]
    cann = steps.cann(cann_home)
    env = steps.environment(cann)
    npu = steps.npu(cann_home)
    cards = choose_cards(settings.card, settings.tp, len(npu.chips) if npu.npu_smi and not npu.error else None)
    card, card_source = card_of(npu.chips)
    row = steps.row(settings.matrix, cann)
    facts = steps.venv(venv, env)
    if facts is None and not settings.dry_run:
        raise BadInput(
            f"--venv {venv} is not a working venv",
            hint="run 'ascend-setup install' first, or pass the venv it made with --venv",
        )
    return Context(
        settings=settings,
        model=model,
        name=server_name(model),
        files=files,
        workdir=workdir,
        venv=venv,
        cann=cann,
        env=env,
        npu=npu,
        cards=cards,
        card=card,
        card_source=card_source,
        row=row,
        facts=facts,
        plugin=(facts.versions.get("vllm-ascend") if facts else None) or row.packages["vllm-ascend"],
        bandwidth=steps.bandwidth(workdir),
        set_env=[str(s) for s in cann.set_env_scripts()] if cann and cann.set_env else [],
    )
