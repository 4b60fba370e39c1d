"""Prove the first requests: an untimed warm-up (0.23.0 has none of its own, and hybrid models JIT-compile Triton
kernels on first use), then a chat request with thinking off. This is where a shadowed triton-ascend crashes
(`'function' object is not subscriptable`), so a failure here is triaged from the server's log."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Iterator, Tuple

#: The first request may compile kernels for minutes; later ones are quick.
WARM_UP_TIMEOUT, REQUEST_TIMEOUT = 900.0, 120.0
PROMPT = "Name the capital of France in one word."


class RequestFailed(Exception):
    """A request the server did not answer as it should (the caller triages the server's log)."""


def post(url: str, body: Dict[str, Any], timeout: float) -> Dict[str, Any]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer: Dict[str, Any] = json.loads(response.read(8 << 20))  # the OpenAI API's reply object
            return answer
    except urllib.error.HTTPError as exc:
        raise RequestFailed(f"HTTP {exc.code} from {url}: {exc.read(300).decode(errors='replace').strip()}") from None
    except (OSError, ValueError) as exc:
        raise RequestFailed(f"{url}: {exc}") from None


def stream(url: str, body: Dict[str, Any], timeout: float) -> Iterator[Tuple[float, Dict[str, Any]]]:
    """Server-sent events of a streamed request: (arrival time, event) until `[DONE]`."""
    request = urllib.request.Request(
        url, data=json.dumps({**body, "stream": True}).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            for raw in response:
                now = time.perf_counter()
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    return
                event = json.loads(payload)
                if isinstance(event, dict) and event.get("error"):  # vLLM fails mid-stream with HTTP 200
                    error = event["error"]
                    said = error.get("message") if isinstance(error, dict) else error
                    raise RequestFailed(f"{url} failed mid-stream: {str(said)[:300]}")
                yield now, event
    except urllib.error.HTTPError as exc:
        raise RequestFailed(f"HTTP {exc.code} from {url}: {exc.read(300).decode(errors='replace').strip()}") from None
    except (OSError, ValueError) as exc:
        raise RequestFailed(f"{url}: {exc}") from None


def warm_up(base: str, name: str) -> None:
    post(
        f"{base}/v1/completions", {"model": name, "prompt": PROMPT, "max_tokens": 8, "temperature": 0}, WARM_UP_TIMEOUT
    )


def chat(base: str, name: str) -> str:
    """The answer, from `content` or, for a reasoning parser, `reasoning` / `reasoning_content`."""
    reply = post(
        f"{base}/v1/chat/completions",
        {
            "model": name,
            "messages": [{"role": "user", "content": PROMPT}],
            "temperature": 0,
            "max_completion_tokens": 32,
            "chat_template_kwargs": {"enable_thinking": False},
        },
        REQUEST_TIMEOUT,
    )
    try:
        message = reply["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise RequestFailed(f"the chat reply has no message: {json.dumps(reply)[:200]}") from None
    for key in ("content", "reasoning", "reasoning_content"):
        text = message.get(key)
        if isinstance(text, str) and text.strip():
            return text.strip()
    raise RequestFailed(f"the chat reply is empty: {json.dumps(message)[:200]}")
