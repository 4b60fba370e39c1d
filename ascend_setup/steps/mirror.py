"""mirror: which index the install downloads from, decided once and recorded for resumes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from ascend_setup.engine.step import Step
from ascend_setup.matrix.models import MIRROR
from ascend_setup.resolve.lockfile import read_lock
from ascend_setup.steps.install_session import InstallSession
from ascend_setup.steps.options import named_index
from ascend_setup.steps.outputs import MirrorChoice
from ascend_setup.utils.files import open_append


def user_extra_indexes(ctx: InstallSession) -> List[str]:
    """The user's --extra-index-url only: the row's named indexes serve just the packages assigned to them."""
    return list(ctx.options.extra_index_urls or [])


class ChooseMirror(Step[MirrorChoice]):
    """choose the package index (fastest fresh mirror, --mirror URL|none, or --index-url)"""

    name = "mirror"
    Output = MirrorChoice
    depends_on = ("preflight",)

    def inputs(self, ctx: InstallSession) -> Dict[str, Any]:
        o = ctx.options
        return {"mirror": o.mirror, "index_url": o.index_url, "extra_index_urls": user_extra_indexes(ctx)}

    def is_done(self, ctx: InstallSession) -> bool:
        return ctx.has(self) and bool(ctx.get(ChooseMirror).index_url)

    def run(self, ctx: InstallSession, log: Path) -> MirrorChoice:
        o = ctx.options
        extras = user_extra_indexes(ctx)
        fallbacks: List[str] = []
        named = named_index(o.index_url, o.mirror)
        if ctx.bundle is not None:  # nothing to choose: every file comes from the bundle
            chosen, source = read_lock(ctx.bundle.lock_path).indexes[MIRROR], f"skipped: the bundle {ctx.bundle.root}"
        elif named:
            chosen, source = named
        elif o.mirror == "none":
            chosen, source = ctx.the_pip_settings.index, "pip's configuration"
        else:
            from ascend_setup.mirrors.choice import choose_for_install

            chosen, source, fallbacks = choose_for_install(
                ctx.the_matrix, ctx.the_row, ctx.root, ctx.facts.python_minor, log
            )
        with open_append(log) as handle:
            handle.write(f"index: {chosen} ({source})\nextra indexes: {extras}\nfail-over mirrors: {fallbacks}\n")
        return MirrorChoice(index_url=chosen, extra_index_urls=extras, source=source, fallbacks=fallbacks)
