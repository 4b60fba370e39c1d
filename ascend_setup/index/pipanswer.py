"""pip's answer about its own configuration, remembered between runs.

Asking pip means importing its internals: 0.15-0.2 s on every command that reads pip's settings, a tenth of
a whole `plan`. The answer is a function of this pip, the variables pip reads and the files it considers, so
the memo keeps all of them: the variables and pip's module as a key, and the stat of every file pip considers
(present or not). A change to any of them, a file that appears, or a memo that does not load, asks pip again.
The memo is written when the command ends (registered on its run, `utils/run_context`), and not by a command
refused as bad input, which touches nothing.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from pydantic import BaseModel, ConfigDict, Field

from ascend_setup.errors import BadInput
from ascend_setup.utils.files import atomic_write_text
from ascend_setup.utils.inputs import PathText, Prose, load_model
from ascend_setup.utils.paths import cache_dir
from ascend_setup.utils.run_context import at_end

MEMO_NAME = "pip-answer.json"
#: What pip's configuration reads besides its files: its own variables and where the user's files are.
_ENV = ("HOME", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "VIRTUAL_ENV")
#: Far more files than pip considers (PIP_CONFIG_FILE, the global, user and site ones).
MAX_FILES = 64

Stat = Optional[List[int]]


class PipAnswer(BaseModel):
    """What `pipconfig` asks pip: its items (pip 26 nests them by file), its default index, its files."""

    model_config = ConfigDict(extra="forbid", strict=True)

    items: Dict[Prose, Union[Prose, Dict[Prose, Prose]]] = Field(max_length=10_000)
    default: PathText
    files: List[PathText] = Field(max_length=MAX_FILES)


class _Memo(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    key: Dict[Prose, Prose] = Field(max_length=10_000)
    considered: Dict[PathText, Optional[List[int]]] = Field(max_length=MAX_FILES)
    answer: PipAnswer


def _stat(path: str) -> Stat:
    """Enough of a file's stat to see any change (an edit of the same size moves its ctime); None if absent."""
    try:
        st = os.stat(path)  # through a link, as pip reads it
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev]


def memo_key() -> Optional[Dict[str, str]]:
    """This interpreter, its pip (found, not imported) and the variables pip reads; None without a pip."""
    try:
        spec = importlib.util.find_spec("pip")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    pip_stat = _stat(spec.origin)
    if pip_stat is None:
        return None
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k in _ENV}
    return {
        "python": sys.executable,
        "prefix": sys.prefix,
        "pip": f"{spec.origin} {pip_stat}",
        **{f"env {k}": v for k, v in sorted(env.items())},
    }


def _path() -> Path:
    return cache_dir() / MEMO_NAME


def recall(key: Dict[str, str], path: Optional[Path] = None) -> Optional[dict]:
    """The remembered answer for `key` (in `path`, else the tool's cache), if no file pip considers has changed."""
    path = path or _path()
    if not os.path.lexists(path):
        return None
    try:
        memo = load_model(path, "pip-answer", _Memo, follow=False)
    except BadInput:
        return None  # damaged or someone else's: ask pip
    if memo.key != key or any(_stat(f) != st for f, st in memo.considered.items()):
        return None
    return memo.answer.model_dump()


def stats(files: Sequence[str]) -> Dict[str, Stat]:
    """The files pip considers, each with its stat (None if absent), taken before pip reads them."""
    return {f: _stat(f) for f in dict.fromkeys(files)}


def remember(key: Dict[str, str], considered: Dict[str, Stat], answer: Dict[str, Any]) -> None:
    """Write pip's answer, with the stat of each file pip considered from before it read them, when the command
    ends (`run_context`): not at all if it is refused as bad input."""
    try:
        memo = _Memo(key=key, considered=considered, answer=PipAnswer.model_validate(answer))
    except ValueError:  # an answer the memo cannot hold: not remembered, asked again next time
        return
    at_end(MEMO_NAME, lambda: keep(memo))


def keep(memo: _Memo) -> None:
    """Write `memo`; a cache that cannot be written (read-only home, full disk, a link there) is skipped."""
    try:
        path = _path()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, memo.model_dump_json())
    except (OSError, BadInput):
        pass
