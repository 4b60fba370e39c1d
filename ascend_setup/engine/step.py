"""What a step is: declared inputs, a check against the real world, the work itself and its typed outputs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar, Dict, Generic, Mapping, Optional, Tuple, Type, TypeVar, Union

from pydantic import BaseModel, ConfigDict


class StepOutput(BaseModel):
    """What a step records when it finishes (in the state file, so it survives restarts). Steps declare a
    model of their own; this one keeps whatever a step returns, for steps that record nothing in particular."""

    model_config = ConfigDict(extra="allow")


#: A step's outputs model. Covariant, since a step only produces it: any step is then a `Step[BaseModel]`,
#: which is how the runner and the pipeline hold a list of different steps.
O_co = TypeVar("O_co", bound=BaseModel, covariant=True)


class Step(Generic[O_co]):
    """A unit of the pipeline. Subclasses set `name` and `Output`, may set `depends_on`, and implement the rest.

    `is_done` must look at the world (installed versions, files, hashes): a marker alone lies.
    `run` must cope with its own partial output, because a SIGKILL can stop it anywhere.
    """

    name: ClassVar[str]
    depends_on: ClassVar[Tuple[str, ...]] = ()
    Output: ClassVar[Type[BaseModel]] = StepOutput

    def inputs(self, session: Any) -> Dict[str, Any]:
        """JSON-able values that, when changed, make this step (and its dependents) run again."""
        return {}

    def is_done(self, session: Any) -> bool:
        raise NotImplementedError

    def why_not_done(self, session: Any) -> str:
        """Why `is_done` said no, for the reason a rerun prints (steps with a richer check override it)."""
        return "the check no longer holds"

    def run(self, session: Any, log: Path) -> Union[O_co, Dict[str, Any], None]:
        """Do the work; return the outputs later steps read with `session.get(ThisStep)`."""
        raise NotImplementedError

    def repair_interrupted(self, session: Any, log: Path) -> None:
        """Called before `run` when the last run of this step stopped mid-way (recorded `started` or
        `failed`): check what it was writing and repair it, since `is_done`'s cheap check may trust a
        half-written file. Not called for a step recorded `done`, so a clean rerun pays nothing."""

    def describe(self, session: Any) -> str:
        doc = (type(self).__doc__ or self.name).strip()
        return doc.splitlines()[0]

    @classmethod
    def output_of(cls, recorded: Optional[Union[BaseModel, Mapping[str, Any]]]) -> BaseModel:
        """The step's outputs as its model: what `run` returned, or what the state file recorded."""
        if isinstance(recorded, cls.Output):
            return recorded
        if isinstance(recorded, BaseModel):
            recorded = recorded.model_dump()
        return cls.Output.model_validate(dict(recorded or {}))


def fingerprint(inputs: Mapping[str, Any], upstream: Tuple[str, ...] = ()) -> str:
    """A stable hash of a step's inputs and its dependencies' fingerprints (unchanged since the first state
    file: a different hash would rerun every step of an install made by an older release)."""
    payload = json.dumps({"inputs": inputs, "upstream": list(upstream)}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
