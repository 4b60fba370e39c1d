"""The `docker run` this host needs for vLLM-Ascend: the docs' command, with the cards chosen, the driver's
files where this host has them, the image for its card and a /dev/shm for serving. Printed, never run."""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Tuple, get_args

from ascend_setup.container.facts import (
    MANAGER_NODES,
    MOUNTS,
    container_data,
    davinci_nodes,
    driver_at_least,
    driver_version,
    host_driver_dir,
    host_source,
    minimum_driver,
    parse_cards,
    under,
)
from ascend_setup.errors import AscendSetupError, BadInput
from ascend_setup.host.npu import npu_facts
from ascend_setup.matrix.models import Row
from ascend_setup.matrix.soc import label
from ascend_setup.utils.paths import is_this_host

#: The container tools the command is written for: one type for the flag's choices and the options model.
Runtime = Literal["docker", "nerdctl", "ascend-docker-runtime"]
RUNTIMES: Tuple[str, ...] = get_args(Runtime)
#: What Ascend Docker Runtime mounts itself (its default base.list): the rest still needs a -v.
RUNTIME_MOUNTS = ("dcmi", "npu-smi", "driver lib64")
CACHE_TARGET = "/root/.cache"


@dataclass
class RunCommand:
    runtime: str
    cards: List[int]
    device_type: Optional[str]
    image: str
    row: str
    lines: List[str]
    missing: List[str] = field(default_factory=list)  # the host lacks them: left out of the command
    notes: List[str] = field(default_factory=list)

    def text(self) -> str:
        """One item per line, continued with backslashes: pasted as is into a shell."""
        return " \\\n  ".join(self.lines)

    def to_json(self) -> Dict[str, Any]:
        return {
            **asdict(self),
            "device_type": label(self.device_type) if self.device_type else None,
            "command": self.text(),
            "argv": [a for line in self.lines for a in shlex.split(line)],
        }


def choose_cards(root: Path, given: Optional[str]) -> List[int]:
    """The cards asked for (--cards, each one this host has a /dev/davinciN for), else all of them."""
    present = davinci_nodes(root)
    if given is None:
        if not present:
            raise AscendSetupError(
                "this host has no /dev/davinciN: there is no NPU to give a container",
                hint="install the NPU driver, then check 'npu-smi info'",
            )
        return present
    cards = parse_cards(given, "--cards")
    absent = [c for c in cards if c not in present]
    if absent:
        have = ", ".join(map(str, present)) or "none"
        raise BadInput(f"--cards {given}: this host has no card {', '.join(map(str, absent))} (cards: {have})")
    return cards


def image_for(row: Row, device_type: Optional[str]) -> str:
    """The vllm-ascend image of the row's release for the card: quay.io/ascend/vllm-ascend:vX[-a3|-310p]."""
    data = container_data().image
    if device_type not in data.variants:
        raise AscendSetupError(
            f"no vllm-ascend image is known for this card (device type {label(device_type)})", hint="pass --image IMAGE"
        )
    return f"{data.repository}:v{row.packages['vllm-ascend']}{data.variants[device_type]}"


def compose(
    root: Path,
    row: Row,
    *,
    cards: Optional[str],
    runtime: str,
    image: Optional[str],
    cache: Path,
    run_tools: bool = False,
) -> RunCommand:
    """The command for the host under `root` (/ on a real host): its cards, its driver's files, its card's image."""
    chosen = choose_cards(root, cards)
    # a root given to read is never executed: its npu-smi runs only when it is / or the user said so
    may_run = run_tools or is_this_host(root)
    device_type = npu_facts(str(under(root, host_driver_dir(root)))).device_type if may_run else None
    if image is None and not may_run:
        raise BadInput(
            f"--root {root} is read, not run: its card (and so its image) is known only from its npu-smi",
            hint="pass --image IMAGE, or --run-root-tools to let ascend-setup run that root's npu-smi",
        )
    image = image or image_for(row, device_type)
    shm = container_data().shm.serve_gib
    lines = [f"{'nerdctl' if runtime == 'nerdctl' else 'docker'} run --rm --name vllm-ascend"]
    if runtime == "ascend-docker-runtime":
        lines += ["--runtime ascend", f"-e ASCEND_VISIBLE_DEVICES={','.join(map(str, chosen))}"]
    lines.append(f"--shm-size={shm:g}g")
    if runtime != "ascend-docker-runtime":
        lines += [f"--device /dev/davinci{c}" for c in chosen] + [f"--device /dev/{n}" for n in MANAGER_NODES]
    missing, notes = [], []
    for mount in MOUNTS:
        if runtime == "ascend-docker-runtime" and mount.name in RUNTIME_MOUNTS:
            continue
        source = host_source(root, mount)
        if source is None:
            missing.append(mount.target)
        else:
            lines.append(f"-v {shlex.quote(source)}:{shlex.quote(mount.target)}")
    lines += [f"-v {shlex.quote(str(cache))}:{CACHE_TARGET}", "-p 8000:8000", f"-it {shlex.quote(image)} bash"]
    if missing:
        notes.append(f"not found on this host, left out: {', '.join(missing)}")
    if device_type == "A3" and len(chosen) < 2:
        notes.append("an A3 needs at least 2 NPUs working together (vllm-ascend's quick start)")
    driver, lowest = driver_version(root, f"{host_driver_dir(root)}/version.info"), minimum_driver(row.cann)
    if driver and lowest and driver_at_least(driver, lowest) is False:
        notes.append(f"the host's driver {driver} is older than CANN {row.cann} (the image's) needs: {lowest}")
    return RunCommand(
        runtime=runtime,
        cards=chosen,
        device_type=device_type,
        image=image,
        row=row.cann,
        lines=lines,
        missing=missing,
        notes=notes,
    )
