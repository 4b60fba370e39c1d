"""redact_url, the one function every shown URL passes through: passwords and secret query values masked,
the user name, the host and everything else kept; text and streams through it."""

from __future__ import annotations

import io

import pytest

from ascend_setup.utils.redact import RedactingStream, redact, redact_url

CASES = [
    ("http://alice:PASSWORD@host/simple/", "http://alice:****@host/simple/"),
    ("https://alice:pa:ss%40w@host:8443/x", "https://alice:****@host:8443/x"),
    ("http://host/simple/?token=SECRET", "http://host/simple/?token=****"),
    ("http://host/f.tar.gz?a=1&access_token=SECRET&b=2", "http://host/f.tar.gz?a=1&access_token=****&b=2"),
    ("http://host/f?X-Amz-Signature=SECRET", "http://host/f?X-Amz-Signature=****"),
    ("http://host/f?api_key=SECRET#frag", "http://host/f?api_key=****#frag"),
    ("file:///srv/wheels/", "file:///srv/wheels/"),
    ("http://alice@host/simple/", "http://alice@host/simple/"),  # no password: the user name alone stays
    ("http://host:8080/simple/", "http://host:8080/simple/"),  # a port is no password
]


@pytest.mark.parametrize("url, shown", CASES, ids=[c[0] for c in CASES])
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact(f"mirror ({url}) could not be reached") == f"mirror ({shown}) could not be reached"


def test_text_without_urls_is_unchanged() -> None:
    text = "pip install six==1.16 -> ok: 3 of 3 @ 10 MB/s; key: value a:b@c"
    assert redact(text) == text


def test_a_redacting_stream_masks_what_is_written_and_forwards_the_rest() -> None:
    target = io.StringIO()
    stream = RedactingStream(lambda: target)
    assert stream.write("$ pip --index-url http://u:PASSWORD@h/s/\n") == len(
        "$ pip --index-url http://u:PASSWORD@h/s/\n"
    )
    stream.writelines(["http://h/?token=SECRET\n"])
    assert target.getvalue() == "$ pip --index-url http://u:****@h/s/\nhttp://h/?token=****\n"
    assert stream.isatty() is False and stream.getvalue() == target.getvalue()


@pytest.mark.parametrize("as_json", [False, True])
def test_every_error_line_and_document_is_redacted(capsys: pytest.CaptureFixture, as_json: bool) -> None:
    """The sink every error passes through (a --build-deps-url archive that failed, a bad --index value, ...):
    the one stderr line, its details and the JSON error document; escapes in it are made visible."""
    from ascend_setup.cli.main import fail
    from ascend_setup.cli.render import Output
    from ascend_setup.errors import StepFailed

    exc = StepFailed(
        "json-3.11.3.tar.gz from http://bob:PASSWORD@127.0.0.1:9/deps/json.tar.gz?sig=SECRET failed\x1b[2J",
        hint="check --build-deps-url http://bob:PASSWORD@127.0.0.1:9/deps/",
        details="GET http://bob:PASSWORD@127.0.0.1:9/deps/json.tar.gz: 403",
    )
    assert fail(Output(as_json), exc) == exc.exit_code
    out, err = capsys.readouterr()
    for text in (out, err):
        assert "PASSWORD" not in text and "SECRET" not in text
    assert "bob:****@127.0.0.1:9" in err and "\x1b" not in err and "\\x1b[2J" in err
    assert ("bob:****@" in out) == as_json
