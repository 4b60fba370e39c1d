"""mirror: which index the install downloads from, decided once and recorded for resumes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from ascend_setup.steps.base import Context, Step
from ascend_setup.steps.common import settings_of
from ascend_setup.fsutil import open_append


def user_extra_indexes(ctx: Context) -> list:
    """The user's --extra-index-url only: the row's named indexes serve just the packages assigned to them."""
    return list(ctx.options.get("extra_index_urls") or [])


class ChooseMirror(Step):
    """choose the package index (fastest fresh mirror, --mirror URL|none, or --index-url)"""

    name = "mirror"
    depends_on = ("preflight",)

    def inputs(self, ctx: Context) -> Dict[str, Any]:
        o = ctx.options
        return {"mirror": o.get("mirror", "auto"), "index_url": o.get("index_url"),
                "extra_index_urls": user_extra_indexes(ctx)}

    def is_done(self, ctx: Context) -> bool:
        out = ctx.outputs.get(self.name) or {}
        return bool(out.get("index_url"))

    def run(self, ctx: Context, log: Path) -> Dict[str, Any]:
        o = ctx.options
        extras = user_extra_indexes(ctx)
        fallbacks: list = []
        if o.get("index_url"):
            chosen, source = o["index_url"], "--index-url"
        elif o.get("mirror") not in (None, "auto", "none"):
            chosen, source = o["mirror"], "--mirror"
        elif o.get("mirror") == "none":
            chosen, source = settings_of(ctx).index, "pip's configuration"
        else:
            from ascend_setup.mirrors.choice import choose_for_install

            chosen, source, fallbacks = choose_for_install(ctx, log)
        with open_append(log) as handle:
            handle.write(f"index: {chosen} ({source})\nextra indexes: {extras}\nfail-over mirrors: {fallbacks}\n")
        return {"index_url": chosen, "extra_index_urls": extras, "source": source, "fallbacks": fallbacks}
