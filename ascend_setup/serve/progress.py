"""The install's live line, naming the server's start-up phase instead of pip's action: 'loading weights',
'compiling', 'capturing graphs' (a rich status in a terminal, a heartbeat line off one)."""

from __future__ import annotations

from ascend_setup.cli.progress import ConsoleReporter
from ascend_setup.serve.run import phase_of


class PhaseReporter(ConsoleReporter):
    def activity(self, line: str) -> None:
        phase = phase_of(line)
        if phase:
            self.action = phase
            if self.status is not None:
                self.status.update(self._text())
        if line.strip():
            self.last = f"[{self.action}] {line.strip()}"
