"""From serve's context to the command it will run: fit's figures, the composed command and environment, checked
against the installed plugin's own keys. Reads only the context (and the plugin's source, to validate)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ascend_setup.errors import AscendSetupError
from ascend_setup.fit.estimate import Fit, estimate
from ascend_setup.matrix.models import RuntimeHint
from ascend_setup.serve.compose import ServePlan, choose_max_model_len, compose
from ascend_setup.serve.context import Context
from ascend_setup.serve.families import families_for, traits
from ascend_setup.serve.user_args import CONFIG, UserArgs, config_object, read_command

AUTO = -1  # --max-model-len auto: vLLM picks the largest that fits


def fit_for(ctx: Context, context: int, user: UserArgs) -> Fit:
    return estimate(
        ctx.files,
        ctx.card,
        ctx.row,
        context=context,
        utilisation=ctx.settings.gpu_memory_utilization,
        kv_dtype="bf16",
        bandwidth=ctx.bandwidth,
        bandwidth_source="probe" if ctx.bandwidth else "card-table",
        tp=len(ctx.cards),
        serving=user.serving(),
    )


def unneeded_hints(ctx: Context) -> List[RuntimeHint]:
    """The row's hints needed only without Triton, on a venv whose HAS_TRITON is True (unknown: all kept)."""
    if ctx.facts is None or ctx.facts.has_triton is not True:
        return []
    return [h for h in ctx.row.hints() if h.only_without_triton]


def plan(ctx: Context) -> Tuple[ServePlan, Fit]:
    """The command and environment to serve with, and fit's figures for them; refused when fit says it cannot run."""
    settings, config = ctx.settings, ctx.files.config
    user = UserArgs.read(list(settings.vllm_args))
    fit = fit_for(ctx, int(config.get("max_position_embeddings") or 32768), user)
    if fit.blockers:
        raise AscendSetupError(
            f"serve {ctx.name} refused: {fit.blockers[0]}", hint="'ascend-setup fit' shows the figures"
        )
    given = user.given.get("max_model_len") or settings.max_model_len
    length, why = choose_max_model_len(fit, config, settings.concurrency, None if given == AUTO else given)
    found = traits(config, ctx.files.quant_description)
    composed = compose(
        name=ctx.name,
        model=ctx.model,
        vllm=ctx.venv / "bin" / "vllm",
        fit=fit,
        config=config,
        found=found,
        families=families_for(found, ctx.plugin, len(ctx.cards)),
        plugin=ctx.plugin,
        port=settings.port,
        cards=ctx.cards,
        max_model_len=length,
        why_len=why,
        concurrency=settings.concurrency,
        utilisation=settings.gpu_memory_utilization,
        user=user,
        unneeded=unneeded_hints(ctx),
    )
    composed.set_env = list(ctx.set_env)
    return composed, fit


def validate(ctx: Context, composed: ServePlan) -> Tuple[bool, List[str]]:
    """Against the installed plugin's source: (validated, warnings); not validated when there is no venv to
    read it from (dry run only)."""
    from ascend_setup.serve.keys import installed_keys
    from ascend_setup.serve.validate import check_against

    if ctx.facts is None or ctx.facts.plugin_dir is None:
        if not ctx.settings.dry_run:
            raise AscendSetupError(f"vllm-ascend is not installed in {ctx.venv}", hint="ascend-setup install")
        return False, []
    keys = installed_keys(ctx.facts.plugin_dir, ctx.plugin)
    config = config_object(read_command(composed.argv[2:]).get(CONFIG), "in the composed command")
    return True, check_against(keys, config=config, env=composed.environment, user_env=os.environ)


def dry_run_document(
    ctx: Context, composed: ServePlan, validated: bool, versions: List[Any], warnings: List[str]
) -> Dict[str, Any]:
    """`serve MODEL --dry-run --json`: the plan, whether it was validated (and why not), the card, the warnings
    and what preflight's version check finds in the venv."""
    return {
        **composed.to_json(),
        "validated": validated,
        "note": not_validated(ctx, validated),
        "card": ctx.card.name,
        "card_source": ctx.card_source,
        "warnings": warnings,
        "versions": [
            {"name": v.name, "found": v.found, "pin": v.pin, "accepted": v.accepted, "note": v.said()} for v in versions
        ],
    }


def not_validated(ctx: Context, validated: bool) -> Optional[str]:
    return None if validated else f"not validated: no vllm-ascend installed in {ctx.venv} to read its keys from"


def dry_run_script(
    ctx: Context, composed: ServePlan, validated: bool, versions: List[Any], warnings: List[str]
) -> List[str]:
    """`serve MODEL --dry-run`: the script, after what preflight's version check finds (a refusal is said, not
    raised: nothing starts)."""
    said = [("" if v.accepted else "preflight would refuse: ") + v.said() for v in versions]
    note = not_validated(ctx, validated)
    return (
        [f"# version: {s}" for s in said]
        + [f"# warning: {w}" for w in warnings]
        + composed.script()
        + ([f"# {note}"] if note else [])
    )
