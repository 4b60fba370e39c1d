"""One exception family. Every error is one line for the user plus a hint, and owns its exit code."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2
EXIT_LOCKED = 3


class AscendSetupError(Exception):
    """Base of every error the tool reports to a user; never shown as a traceback."""

    exit_code = EXIT_FINDINGS

    def __init__(self, message: str, *, hint: Optional[str] = None, details: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details  # e.g. the log lines around a root cause, shown above the one line

    def one_line(self) -> str:
        """The single stderr line: what went wrong and what to do about it."""
        text = " ".join(self.message.split())
        if self.hint:
            text += f" (hint: {' '.join(self.hint.split())})"
        return f"ascend-setup: error: {text}"


class BadInput(AscendSetupError):
    """A flag, matrix file, state file or path the user gave cannot be used."""

    exit_code = EXIT_BAD_INPUT

    def given_as(self, source: str) -> BadInput:
        """This error about a value, named by where the user gave it (a flag, or its environment variable):
        lower layers speak of the value alone, and the layer that knows the flag adds it."""
        return BadInput(f"{source} {self.message}", hint=self.hint, details=self.details)


@contextmanager
def named_by(source: str) -> Iterator[None]:
    """A BadInput raised inside, about a value, is named by `source` (the flag or the variable it came from)."""
    try:
        yield
    except BadInput as exc:
        raise exc.given_as(source) from None


class LockHeld(AscendSetupError):
    """Another run owns the workdir lock."""

    exit_code = EXIT_LOCKED


class StepFailed(AscendSetupError):
    """A pipeline step failed; the message carries the triaged root cause."""

    exit_code = EXIT_FINDINGS
