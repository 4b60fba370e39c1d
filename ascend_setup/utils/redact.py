"""Credentials never leave the process: a URL's password (`http://user:PASSWORD@host/`) and its secret query
values (`?token=...`) are masked by `redact_url`, the one function every shown URL passes through. The
outputs (stderr's line, stdout's JSON, the consoles, every log) pass their text through `redact`, which
finds each URL in it and hands it to `redact_url`; a user name stays, so the user can tell which account a
message is about. What the tool runs keeps the real URL: only what it shows is masked."""

from __future__ import annotations

import re
from typing import Any, Callable, TextIO, cast

MASK = "****"  # as pip shows a masked password
#: Query keys whose value is a secret (a hub's or a proxy's token, a signed link's signature).
_SECRET_KEYS = r"[a-z0-9_-]*(?:token|password|passwd|secret|key|sig|signature|auth|credential)"
#: A URL's userinfo with a password: scheme://user:password@ (no '/', '@' or space inside).
_USERINFO = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/@:'\"<>]*:)(?P<password>[^\s/@'\"<>]+)(?=@)")
_QUERY = re.compile(r"(?P<head>[?&]" + _SECRET_KEYS + r"=)(?P<secret>[^&#\s'\"<>()\[\],;]+)", re.I)


def redact_url(url: str) -> str:
    """`url` as it may be shown: its password and its secret query values replaced by ****."""
    url = _USERINFO.sub(lambda m: m.group("head") + MASK, url)
    return _QUERY.sub(lambda m: m.group("head") + MASK, url)


def redact(text: str) -> str:
    """Any text (a message, a log line, a JSON document) with every URL in it through redact_url."""
    if "://" not in text and "=" not in text:  # the common case: nothing that could carry a secret
        return text
    return redact_url(text)


class RedactingStream:
    """A text stream (a console's file, a log's handle) that redacts what is written to it; everything else
    (isatty, fileno, encoding, flush, close) is the wrapped stream's. `stream` is asked for the target on
    each write, so a console made before a test swaps sys.stdout still writes to the current one."""

    def __init__(self, stream: Callable[[], TextIO]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream().write(redact(text))
        return len(text)  # what the caller gave: a shorter masked text is no short write

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream(), name)

    def __enter__(self) -> RedactingStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream().close()


def redacting(stream: Callable[[], TextIO]) -> TextIO:
    """`stream` behind a RedactingStream, typed as the text stream it stands for (a console's `file`, a log)."""
    return cast(TextIO, RedactingStream(stream))
