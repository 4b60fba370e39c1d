"""One report of many hosts' audits: one `<host>.audit.json` per host, either plain `audit --json` output or
the Ansible audit play's wrapper (`{"host", "rc", "stderr", "audit"}`: that output, or why it could not run);
this reads them into a hosts x findings view. A severity it does not know is never called clean. Each file
is read through a bounded model: a finding without an id, or with a list for one, is bad input naming the
file and the field, never a traceback in the middle of the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from typing_extensions import Annotated

from ascend_setup.errors import BadInput
from ascend_setup.utils.inputs import MiB, Name, PathText, Prose, load_json, validate

SUFFIX = ".audit.json"
KNOWN_SEVERITIES = ("error", "warning", "info")
#: A venv's audit has tens of findings; this leaves room for a far larger one, not for a bomb.
MAX_FINDINGS = 10_000
HINT = "the audit play writes these files, as does 'audit --json'"
#: A failed audit's stderr as the play captured it: its last line is shown, the rest may be a long log.
Stderr = Annotated[str, StringConstraints(strict=True, max_length=MiB)]


class Finding(BaseModel):
    """One finding as `audit --json` writes it (audit/rules.Finding). Keys a newer audit adds are dropped;
    a severity it adds is kept, and counted as unknown."""

    model_config = ConfigDict(extra="ignore")

    id: Name
    severity: Name
    package: Optional[Name] = None
    message: Prose = ""
    fix: Optional[Prose] = None
    evidence: Optional[Prose] = None


class AuditOutput(BaseModel):
    """What `audit --json` prints: the report keeps its venv, lock and findings."""

    model_config = ConfigDict(extra="ignore")

    venv: Optional[PathText] = None
    lock: Optional[PathText] = None
    findings: List[Finding] = Field(max_length=MAX_FINDINGS)


class PlayResult(BaseModel):
    """The audit play's wrapper: `audit` is None when the audit did not run (rc 2 or worse)."""

    model_config = ConfigDict(extra="ignore")

    host: Optional[Name] = None
    rc: Optional[int] = Field(default=None, strict=True, ge=-255, le=255)
    stderr: Optional[Stderr] = None
    audit: Optional[AuditOutput]


@dataclass
class HostAudit:
    host: str
    findings: List[Finding] = field(default_factory=list)
    venv: Optional[str] = None
    lock: Optional[str] = None
    error: Optional[str] = None  # the audit did not run (why, in one line)

    @property
    def errors(self) -> int:
        return sum(f.severity == "error" for f in self.findings)

    @property
    def unknown(self) -> int:
        """Findings of a severity this version does not know (a newer audit's): a look is needed."""
        return sum(f.severity not in KNOWN_SEVERITIES for f in self.findings)

    @property
    def ok(self) -> bool:
        return self.error is None and self.errors == 0 and self.unknown == 0

    def result(self) -> str:
        if self.error:
            return "did not run"
        counts = {s: sum(f.severity == s for f in self.findings) for s in KNOWN_SEVERITIES}
        said = ", ".join(f"{n} {s}{'s' if n > 1 else ''}" for s, n in counts.items() if n)
        if self.unknown:
            said = ", ".join(filter(None, [said, f"{self.unknown} of unknown severity"]))
        if counts["error"] or counts["warning"] or self.unknown:
            return said
        return f"clean ({said})" if said else "clean"

    def to_json(self) -> Dict[str, Any]:
        return {
            "host": self.host,
            "ok": self.ok,
            "result": self.result(),
            "venv": self.venv,
            "lock": self.lock,
            "error": self.error,
            "findings": [f.model_dump() for f in self.findings],
        }


def _one_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def read_host_audit(path: Path) -> HostAudit:
    """`{"host", "rc", "stderr", "audit"}` as the play writes it, or plain `audit --json` output (the host is
    then the file's name); a file that is neither, or whose findings are damaged, is bad input."""
    data: Any = load_json(path, "fleet", hint=HINT)
    stem = path.name[: -len(SUFFIX)]
    source = f"fleet result {path}"
    if isinstance(data, dict) and "audit" not in data and "findings" in data:  # plain `audit --json`
        plain = validate(AuditOutput, data, source, hint=HINT)
        return HostAudit(stem, findings=plain.findings, venv=plain.venv, lock=plain.lock)
    if not isinstance(data, dict) or "audit" not in data:
        raise BadInput(
            f"{path} is not a host audit result (neither audit --json output nor the play's wrapper)",
            hint="the audit play writes these files; run it again",
        )
    audit = data["audit"]
    if not (isinstance(audit, dict) and "findings" in audit):  # no report: why is in rc and stderr
        data = {**data, "audit": None}
    played = validate(PlayResult, data, source, hint=HINT)
    host = played.host or stem
    if played.audit is None:
        return HostAudit(host, error=f"exit {played.rc}: {_one_line(played.stderr or '')}")
    return HostAudit(host, findings=played.audit.findings, venv=played.audit.venv, lock=played.audit.lock)


def read_fleet(directory: Path) -> List[HostAudit]:
    if not directory.is_dir():
        raise BadInput(f"{directory} is not a directory of host audit results")
    paths = sorted(directory.glob(f"*{SUFFIX}"))
    if not paths:
        raise BadInput(f"{directory} holds no *{SUFFIX} file", hint="run the audit play first (ansible/audit.yml)")
    return [read_host_audit(p) for p in paths]


def finding_ids(hosts: List[HostAudit], severities: Sequence[str] = ("error", "warning", "info")) -> List[str]:
    """Every finding id seen (of those severities), errors first, then by how many hosts have it."""
    seen: Dict[str, List[int]] = {}
    rank = {"error": 0, "warning": 1, "info": 2}
    for h in hosts:
        for f in h.findings:
            if f.severity not in severities:
                continue
            entry = seen.setdefault(f.id, [rank.get(f.severity, 2), 0])
            entry[0] = min(entry[0], rank.get(f.severity, 2))
            entry[1] -= 1
    return sorted(seen, key=lambda i: (seen[i][0], seen[i][1], i))


def fleet_json(hosts: List[HostAudit]) -> Dict[str, Any]:
    ids = finding_ids(hosts)
    return {
        "ok": all(h.ok for h in hosts),
        "hosts": [h.to_json() for h in hosts],
        "findings": {i: sorted({h.host for h in hosts for f in h.findings if f.id == i}) for i in ids},
        "did_not_run": [h.host for h in hosts if h.error],
    }


#: The grid's columns: what needs a look. Infos (expected, by design) are counted in the result column.
GRID_SEVERITIES = ("error", "warning")


def grid(hosts: List[HostAudit]) -> List[List[str]]:
    """Rows of host, result, then per error or warning id the severity it has on that host (blank: none)."""
    ids = finding_ids(hosts, GRID_SEVERITIES)
    rows = []
    for h in hosts:
        by_id = {f.id: f.severity for f in h.findings}
        rows.append([h.host, h.result(), *[by_id.get(i, "") for i in ids]])
    return rows
