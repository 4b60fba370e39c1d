"""What the steps of one run share: the directory it keeps its state and logs in, and the typed outputs of the
steps that finished (this run's, or a previous run's as the state file recorded them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional, Type, TypeVar, Union, cast

from pydantic import BaseModel
from rich.console import Console

from ascend_setup.engine.run_files import RunFiles

if TYPE_CHECKING:
    from ascend_setup.engine.step import Step

O = TypeVar("O", bound=BaseModel)


@dataclass
class Session:
    """A run's session: where its files are, and what its steps recorded."""

    files: RunFiles
    console: Console = field(default_factory=lambda: Console(stderr=True))
    outputs: Dict[str, BaseModel] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return self.files.root

    def get(self, step: Type[Step[O]]) -> O:
        """The outputs `step` recorded when it finished; KeyError when it has not (yet)."""
        return cast(O, self.outputs[step.name])  # the runner records each step's outputs as its Output

    def recorded(self, step: Type[Step[O]]) -> Optional[O]:
        """The outputs `step` recorded, or None when it has not finished."""
        return cast(Optional[O], self.outputs.get(step.name))  # as in get()

    def has(self, step: Union[Type[Step[BaseModel]], Step[BaseModel], str]) -> bool:
        """Whether `step` (a step class, one of its instances, or its name) finished (this run or, as recorded,
        an earlier one)."""
        return (step if isinstance(step, str) else step.name) in self.outputs
