"""`bench --plot FILE.png|.svg`: the standard curve, output throughput against each user's decode speed, one point
per concurrency. matplotlib is an optional extra (`pip install 'ascend-setup[plot]'`), imported only here."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ascend_setup.errors import BadInput

SUFFIXES = (".png", ".svg")


def check(path: Path) -> None:
    """Before the sweep: exit 2 on a file type matplotlib is not asked for here, or when the extra is missing."""
    if path.suffix.lower() not in SUFFIXES:
        raise BadInput(f"--plot {path}: the picture is a .png or a .svg file")
    if not path.parent.is_dir():
        raise BadInput(f"--plot {path}: no folder {path.parent}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BadInput(
            "--plot needs matplotlib, which is not installed", hint="pip install 'ascend-setup[plot]'"
        ) from None


def references(verdicts: List[Any]) -> Dict[str, List[Tuple[float, float]]]:
    """(per-user speed, throughput) of each reference that gives both, by reference name ('fit', 'published'),
    from bench's verdict rows (dicts): fit's curve beside the measured one, the published points."""
    points: Dict[str, List[Tuple[float, float]]] = {}
    for v in verdicts:
        for r in v["references"]:
            if r["reference"] != "calibration" and r["tpot_ms"] and r["output_tok_s"]:
                points.setdefault(r["reference"], []).append((1000.0 / r["tpot_ms"], r["output_tok_s"]))
    return points


def draw(path: Path, levels: List[Any], title: str, verdicts: Optional[List[Any]] = None) -> None:
    """Throughput (tok/s, all users) against per-user speed (1000 / TPOT), each point labelled with its
    concurrency: `levels` are bench's level rows (dicts); `verdicts` add fit's predicted curve and the published
    points."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    speed = [1000.0 / lv["tpot_ms"] for lv in levels if lv["tpot_ms"] > 0]
    throughput = [lv["output_tok_s"] for lv in levels if lv["tpot_ms"] > 0]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    ax.plot(speed, throughput, "o-", color="tab:blue", label="measured")
    extra = references(verdicts or [])
    if extra.get("fit"):
        ax.plot(*zip(*extra["fit"]), "s--", color="tab:orange", label="fit's prediction", alpha=0.8)
    if extra.get("published"):
        ax.plot(*zip(*extra["published"]), "D", color="tab:green", label="published", linestyle="none")
    speed += [x for pts in extra.values() for x, _ in pts]
    throughput += [y for pts in extra.values() for _, y in pts]
    for lv, x, y in zip([lv for lv in levels if lv["tpot_ms"] > 0], speed, throughput):
        ax.annotate(f"c={lv['concurrency']}", (x, y), textcoords="offset points", xytext=(6, 6), fontsize=9)
    ax.set_xlabel("per-user speed (tok/s per user, 1000 / TPOT)")
    ax.set_ylabel("output throughput (tok/s, all users)")
    ax.set_title(title, fontsize=10)
    ax.set_xlim(0, max(speed, default=1.0) * 1.15)  # room for the labels of the outermost points
    ax.set_ylim(0, max(throughput, default=1.0) * 1.15)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower left")  # the curve runs from the lower right (one user) to the top (many): clear of it
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
