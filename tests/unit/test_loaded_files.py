"""Every JSON file the tool loads goes through a bounded model: a generated table of hostile mutations of a
valid example of each kind (a wrong type per field, a missing required field, a list where a string is, a
huge number, nesting, an escape sequence in a key, a 5000-digit number, a file past its kind's size), each
refused the way its kind promises, in process: bad input (BadInput, whose message and hint the terminal
can show safely) for the files a user gives or owns; "measured again" for a cache; "no provenance" for a
dist-info's direct_url.json; a warning for doctor. Each valid example is loaded first, so a refusal is the
mutation's doing, not a broken example's."""

from __future__ import annotations

import copy
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple

import pytest

from ascend_setup.errors import BadInput
from ascend_setup.utils.inputs import KINDS

Key = Tuple[Any, ...]  # a path into a document: dict keys and list indexes
BIG = "__BIG_NUMBER__"  # replaced, in the file's text, by a 5000-digit number (json.dumps refuses to write one)
ESCAPE = "\x1b]0;owned\x07\x1b[2J"  # retitles the window and clears the screen when printed raw


#: Names that, joined to a folder, lead out of it (or hide a byte a path cannot hold, or one a terminal obeys).
LEAVING = {
    "climbs": "../../../home/victim/victim.tar.gz",
    "absolute": "/etc/cron.d/job",
    "nul": "a.whl\0../x",
    "escape": f"a{ESCAPE}.whl",
    "dot-dot": "..",
    "empty-part": "files//x",
}


def _controls(text: str) -> List[str]:
    return [c for c in text if ord(c) < 32 or 0x7F <= ord(c) < 0xA0]


def raises_bad_input(load: Callable[[Path], Any]) -> Callable[[Path], None]:
    """The kind's promise for a file a user gives or owns: BadInput, one line the terminal can show safely."""

    def refused(target: Path) -> None:
        with pytest.raises(BadInput) as caught:
            load(target)
        shown = caught.value.one_line()
        assert not _controls(shown), shown
        assert len(shown.splitlines()) == 1

    return refused


def returns_none(load: Callable[[Path], Any]) -> Callable[[Path], None]:
    def refused(target: Path) -> None:
        assert load(target) is None

    return refused


@dataclass
class Kind:
    """One kind of loaded file: a valid example, where it is written, how it is loaded and how a bad one is
    refused, and which of its fields are strings, numbers, booleans, containers and required."""

    name: str
    size_kind: str  # its kind in utils/inputs.KINDS (the size limit)
    example: Callable[[], Any]
    path: str  # where the file is written, under tmp_path
    target: str  # what `load` takes, under tmp_path (the file, or the directory it is read from)
    load: Callable[[Path], Any]
    refused: Callable[[Path], None]
    strings: Sequence[Key] = ()
    numbers: Sequence[Key] = ()  # bounded numbers: a huge one is refused
    booleans: Sequence[Key] = ()
    containers: Sequence[Key] = ()
    required: Sequence[Key] = ()
    keyed: Sequence[Key] = ()  # mappings whose keys are the file's text: an escape there reaches a message
    names: Sequence[Key] = ()  # names that become paths: one that leaves its folder is refused
    accepted: Callable[[Any], bool] = field(default=lambda loaded: loaded is not None)
    around: Callable[[Path], None] = field(default=lambda tmp_path: None)  # the files beside it

    def place(self, tmp_path: Path, text: str) -> Path:
        """`text` written where this kind is read; returns what `load` takes."""
        path = tmp_path / self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.around(tmp_path)
        return tmp_path / self.target


# -- fleet report: the play's wrapper and plain `audit --json` ---------------------------------------------

FINDING = {
    "id": "triton-upstream",
    "severity": "error",
    "package": "triton",
    "message": "upstream triton",
    "fix": "pip uninstall triton",
    "evidence": "/v/lib/triton",
}


def _read_host_audit(path: Path) -> Any:
    from ascend_setup.fleet.merged_report import read_host_audit

    return read_host_audit(path)


def _finding_fields(prefix: Key) -> Dict[str, List[Key]]:
    return {"strings": [(*prefix, k) for k in FINDING], "required": [(*prefix, "id"), (*prefix, "severity")]}


FLEET_PLAY = Kind(
    "fleet-play",
    "fleet",
    example=lambda: {
        "host": "node1",
        "rc": 1,
        "stderr": "",
        "audit": {"venv": "/v", "lock": "/l", "findings": [FINDING]},
    },
    path="run/node1.audit.json",
    target="run/node1.audit.json",
    load=_read_host_audit,
    refused=raises_bad_input(_read_host_audit),
    strings=[
        ("host",),
        ("stderr",),
        ("audit", "venv"),
        ("audit", "lock"),
        *_finding_fields(("audit", "findings", 0))["strings"],
    ],
    numbers=[("rc",)],
    containers=[("audit", "findings"), ("audit", "findings", 0)],
    required=[("audit",), *_finding_fields(("audit", "findings", 0))["required"]],
)

FLEET_PLAIN = Kind(
    "fleet-plain",
    "fleet",
    example=lambda: {"venv": "/v", "lock": "/l", "ok": False, "findings": [FINDING]},
    path="run/node2.audit.json",
    target="run/node2.audit.json",
    load=_read_host_audit,
    refused=raises_bad_input(_read_host_audit),
    strings=[("venv",), ("lock",), *_finding_fields(("findings", 0))["strings"]],
    containers=[("findings",), ("findings", 0)],
    required=_finding_fields(("findings", 0))["required"],
)


# -- the venv's ascend-setup.json -----------------------------------------------------------------------------


def _read_venv_record(venv: Path) -> Any:
    from ascend_setup.dists.venv_reader import read_venv_record

    return read_venv_record(venv)


VENV_RECORD = Kind(
    "venv-record",
    "venv-record",
    example=lambda: {
        "workdir": "/w",
        "lock": "/w/lock/9.1.0.txt",
        "created": True,
        "indexes": {"mirror": "https://pypi.example/simple", "ascend": "https://ascend.example/simple"},
    },
    path="venv/ascend-setup.json",
    target="venv",
    load=_read_venv_record,
    refused=raises_bad_input(_read_venv_record),
    strings=[("workdir",), ("lock",), ("indexes", "mirror"), ("indexes", "ascend")],
    booleans=[("created",)],
    containers=[("indexes",)],
    required=[("workdir",)],
    keyed=[("indexes",)],
)


# -- fit's config.json ------------------------------------------------------------------------------------------


def _load_config(path: Path) -> Any:
    from ascend_setup.fit.model_files import load_config

    return load_config(path)


FIT_CONFIG = Kind(
    "fit-config",
    "config",
    example=lambda: {
        "model_type": "qwen3",
        "torch_dtype": "bfloat16",
        "num_hidden_layers": 36,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 12288,
        "vocab_size": 151936,
        "max_position_embeddings": 40960,
        "layer_types": ["full_attention"] * 36,
        "quantization_config": {"quant_method": "fp8"},
        "architectures": ["Qwen3ForCausalLM"],
        "vision_config": {"depth": 27, "hidden_size": 1152},
    },
    path="model/config.json",
    target="model",
    load=_load_config,
    refused=raises_bad_input(_load_config),
    strings=[("model_type",), ("torch_dtype",), ("quantization_config", "quant_method"), ("layer_types", 0)],
    numbers=[
        ("num_hidden_layers",),
        ("hidden_size",),
        ("num_attention_heads",),
        ("num_key_value_heads",),
        ("intermediate_size",),
        ("vocab_size",),
        ("max_position_embeddings",),
        ("vision_config", "depth"),
        ("vision_config", "hidden_size"),
    ],
    containers=[("layer_types",), ("quantization_config",), ("vision_config",)],
    required=[("num_hidden_layers",), ("hidden_size",), ("num_attention_heads",)],
)


# -- the workdir's mirrors.json (a cache: a damaged one is measured again) ---------------------------------------


def _mirror_question() -> Tuple[Any, Any, List[str]]:
    from ascend_setup.index.tags import Target
    from ascend_setup.matrix.load import load_matrix

    row = load_matrix().rows["9.1.0"]
    return (
        row,
        Target(glibc="2.31", arch="aarch64", python="3.11"),
        ["https://a.example/simple", "https://b.example/simple"],
    )


def _mirrors_example() -> Any:
    from ascend_setup.mirrors.choice import _cache_key

    row, target, urls = _mirror_question()
    mirror = {"url": urls[0], "status": "ok", "ttfb_s": 0.2, "throughput_bps": 5e7, "detail": ""}
    return {
        "key": _cache_key(row, target, urls),
        "time": time.time(),
        "fallbacks": [urls[1]],
        "result": {"mirrors": [mirror], "chosen": urls[0], "sample": "six-1.16.0.whl", "seconds": 1.5},
    }


def _load_cached(workdir: Path) -> Any:
    from ascend_setup.mirrors.choice import load_cached

    return load_cached(workdir, *_mirror_question())


MIRRORS = Kind(
    "mirrors-cache",
    "mirrors",
    example=_mirrors_example,
    path="wd/mirrors.json",
    target="wd",
    load=_load_cached,
    refused=returns_none(_load_cached),
    strings=[
        ("result", "mirrors", 0, "url"),
        ("result", "mirrors", 0, "status"),
        ("result", "mirrors", 0, "detail"),
        ("result", "chosen"),
        ("result", "sample"),
        ("fallbacks", 0),
    ],
    numbers=[
        ("time",),
        ("result", "seconds"),
        ("result", "mirrors", 0, "ttfb_s"),
        ("result", "mirrors", 0, "throughput_bps"),
    ],
    containers=[("key",), ("result",), ("result", "mirrors"), ("result", "mirrors", 0), ("fallbacks",)],
    required=[
        ("key",),
        ("time",),
        ("result",),
        ("result", "mirrors"),
        ("result", "seconds"),
        ("result", "mirrors", 0, "url"),
        ("result", "mirrors", 0, "status"),
    ],
)


# -- a dist-info's direct_url.json (audit: a damaged one says nothing about where a package came from) ----------

DIST_INFO = "venv/lib/python3.11/site-packages/foo-1.0.dist-info"


def _dist_around(tmp_path: Path) -> None:
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.9\n")
    (tmp_path / "venv" / "bin").mkdir(exist_ok=True)
    (tmp_path / "venv" / "bin" / "python").write_text("")  # read_venv never runs it
    (tmp_path / DIST_INFO / "METADATA").write_text("Metadata-Version: 2.1\nName: foo\nVersion: 1.0\n")


def _direct_url(venv: Path) -> Any:
    from ascend_setup.dists.installed import read_venv

    (dist,) = read_venv(venv).dists
    return dist.direct_url()


DIRECT_URL = Kind(
    "direct-url",
    "metadata",
    example=lambda: {"url": "file:///wheels/foo-1.0-py3-none-any.whl", "archive_info": {}},
    path=f"{DIST_INFO}/direct_url.json",
    target="venv",
    around=_dist_around,
    load=_direct_url,
    refused=returns_none(_direct_url),
    strings=[("url",)],
    required=[("url",)],
)


# -- fit's hub cache, headers.json ------------------------------------------------------------------------------

SHARD = "model.safetensors"


def _hub_example() -> Any:
    return {
        "listing": {
            "source": "huggingface",
            "endpoint": "https://hub.example",
            "repo": "o/m",
            "revision": "main",
            "commit": "a" * 40,
            "files": [{"path": SHARD, "size": 1000, "sha256": "b" * 64}],
        },
        "shards": {SHARD: {"size": 1000, "header": {"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}}},
    }


def _hub_around(tmp_path: Path) -> None:
    (tmp_path / "cache" / "config.json").write_text(json.dumps(FIT_CONFIG.example()))


def _from_cache(directory: Path) -> Any:
    from ascend_setup.hub.remote import _from_cache

    return _from_cache(directory, "o/m", cached=True)


HUB_CACHE = Kind(
    "hub-cache",
    "hub-cache",
    example=_hub_example,
    path="cache/headers.json",
    target="cache",
    around=_hub_around,
    load=_from_cache,
    refused=raises_bad_input(_from_cache),
    strings=[("listing", k) for k in ("source", "endpoint", "repo", "revision", "commit")]
    + [("listing", "files", 0, "path"), ("listing", "files", 0, "sha256")],
    numbers=[("listing", "files", 0, "size"), ("shards", SHARD, "size")],
    containers=[
        ("listing",),
        ("shards",),
        ("listing", "files"),
        ("listing", "files", 0),
        ("shards", SHARD),
        ("shards", SHARD, "header"),
    ],
    required=[
        ("listing",),
        ("shards",),
        ("listing", "commit"),
        ("listing", "files", 0, "path"),
        ("shards", SHARD, "size"),
        ("shards", SHARD, "header"),
    ],
    keyed=[("shards",)],
)


# -- the workdir's state.json, as doctor reads it ----------------------------------------------------------------


def _doctor_example() -> Any:
    step = {"state": "done", "fingerprint": "f", "started_at": 1.0, "ended_at": 2.0, "log": "/wd/logs/venv.log"}
    return {"format": "ascend-setup-install", "version": 1, "options": {}, "steps": {"venv": step}}


def _last_failure(workdir: Path) -> Any:
    from ascend_setup.host.doctor_checks import check_last_failure

    return check_last_failure(workdir)


def _doctor_refused(workdir: Path) -> None:
    check = _last_failure(workdir)
    assert check.status == "warn" and "cannot be read" in check.detail, check
    assert not _controls(check.detail), check.detail


DOCTOR_STATE = Kind(
    "doctor-state",
    "state",
    example=_doctor_example,
    path="wd/state.json",
    target="wd",
    load=_last_failure,
    refused=_doctor_refused,
    strings=[("format",), ("steps", "venv", "state"), ("steps", "venv", "fingerprint"), ("steps", "venv", "log")],
    containers=[("steps",), ("steps", "venv"), ("options",)],
    required=[("format",), ("steps", "venv", "state"), ("steps", "venv", "log"), ("steps", "venv", "started_at")],
    keyed=[("steps",)],
    accepted=lambda check: check.status == "pass",
)

# -- pinned CPython builds (--python-builds): an organisation's own file, or the packaged one -------------------


def _builds_example() -> Any:
    return {
        "source": "a pinned release",
        "release": "https://example.invalid/releases",
        "mirrors": [{"url": "https://example.invalid/releases", "note": "the origin"}],
        "builds": [
            {
                "version": "3.11.16",
                "arch": "x86_64",
                "build": "20260814",
                "file": "cpython-3.11.16+20260814-x86_64-unknown-linux-gnu-install_only_stripped.tar.gz",
                "sha256": "a" * 64,
            }
        ],
    }


def _load_builds(path: Path) -> Any:
    from ascend_setup.managed.pinned import load_builds

    return load_builds(str(path))


PYTHON_BUILDS = Kind(
    "python-builds",
    "python-builds",
    example=_builds_example,
    path="builds.json",
    target="builds.json",
    load=_load_builds,
    refused=raises_bad_input(_load_builds),
    strings=[
        ("source",),
        ("release",),
        ("mirrors", 0, "url"),
        ("mirrors", 0, "note"),
        ("builds", 0, "version"),
        ("builds", 0, "arch"),
        ("builds", 0, "build"),
        ("builds", 0, "file"),
        ("builds", 0, "sha256"),
    ],
    containers=[("mirrors",), ("mirrors", 0), ("builds",), ("builds", 0)],
    required=[("source",), ("release",), ("mirrors",), ("builds",), ("builds", 0, "sha256"), ("builds", 0, "file")],
    names=[("builds", 0, "file")],
)

# -- a bundle's manifest.json (bundle verify, install --bundle) -------------------------------------------------


def _manifest_example() -> Any:
    return {
        "format": "ascend-setup-bundle",
        "version": 1,
        "tool_version": "0.1",
        "created": "2026-12-01T00:00:00",
        "cann": "9.1.0",
        "row": {"cann": "9.1.0"},
        "derived": None,
        "lock": "lock.txt",
        "target": {"arch": "x86_64", "glibc": "2.31", "python": "3.11", "device": "A2", "soc": None},
        "files": [
            {
                "path": "files/six-1.16.0-py2.py3-none-any.whl",
                "size": 11053,
                "sha256": "c" * 64,
                "role": "package",
                "package": "six",
                "version": "1.16.0",
            }
        ],
        "missing": [{"package": "triton-ascend", "version": "3.2.2", "index": None, "reason": "unreachable"}],
    }


def _read_manifest(bundle: Path) -> Any:
    from ascend_setup.bundle.manifest import read_manifest

    return read_manifest(bundle)


BUNDLE_MANIFEST = Kind(
    "bundle-manifest",
    "bundle-manifest",
    example=_manifest_example,
    path="bundle/manifest.json",
    target="bundle",
    load=_read_manifest,
    refused=raises_bad_input(_read_manifest),
    strings=[
        ("files", 0, "path"),
        ("tool_version",),
        ("created",),
        ("cann",),
        ("files", 0, "sha256"),
        ("files", 0, "role"),
        ("files", 0, "package"),
        ("target", "arch"),
        ("target", "glibc"),
        ("target", "python"),
        ("missing", 0, "package"),
        ("missing", 0, "reason"),
    ],
    numbers=[("files", 0, "size")],
    containers=[("row",), ("target",), ("files",), ("files", 0), ("missing",), ("missing", 0)],
    required=[
        ("tool_version",),
        ("cann",),
        ("target",),
        ("files",),
        ("files", 0, "path"),
        ("files", 0, "sha256"),
        ("files", 0, "size"),
        ("missing", 0, "reason"),
    ],
    names=[("files", 0, "path")],
)

# -- the remembered answer of pip's configuration (a cache: a damaged one means asking pip again) -----------------


def _pip_answer_example() -> Any:
    from ascend_setup.index.pipanswer import memo_key

    return {
        "key": memo_key(),
        "considered": {"/nonexistent/pip.conf": None},
        "answer": {
            "items": {"global.timeout": "60", "/etc/pip.conf": {"global.index-url": "https://a.example/simple"}},
            "default": "https://b.example/simple",
            "files": ["/etc/pip.conf"],
        },
    }


def _load_pip_answer(path: Path) -> Any:
    from ascend_setup.index.pipanswer import memo_key, recall

    key = memo_key()
    assert key is not None
    return recall(key, path)


PIP_ANSWER = Kind(
    "pip-answer",
    "pip-answer",
    example=_pip_answer_example,
    path="pip-answer.json",
    target="pip-answer.json",
    load=_load_pip_answer,
    refused=returns_none(_load_pip_answer),
    strings=[
        ("answer", "default"),
        ("answer", "files", 0),
        ("answer", "items", "global.timeout"),
        ("key", "python"),
        ("answer", "items", "/etc/pip.conf", "global.index-url"),
    ],
    containers=[("key",), ("considered",), ("answer",), ("answer", "items"), ("answer", "files")],
    required=[("key",), ("considered",), ("answer",), ("answer", "items"), ("answer", "default"), ("answer", "files")],
    keyed=[("key",), ("considered",)],
)

# -- the error-code catalogue (data/error_codes.yaml: it ships with the tool, and a damaged one is bad input) ------


def _load_codes(path: Path) -> Any:
    from ascend_setup.knowledge.codes import load_catalogue

    return load_catalogue(path)


_CODE = ("codes", 0)
CODES = Kind(
    "error-codes",
    "codes",
    example=lambda: {
        "codes": [
            {
                "code": "EJ0001",
                "family": "cann",
                "kind": "specific",
                "meaning": "HCCP init failure",
                "cause": "the last process runs",
                "fix": "kill it",
                "source": "https://example.invalid/EJ0001",
            }
        ]
    },
    path="error_codes.yaml",
    target="error_codes.yaml",
    load=_load_codes,
    refused=raises_bad_input(_load_codes),
    strings=[(*_CODE, k) for k in ("code", "family", "kind", "meaning", "cause", "fix", "source")],
    containers=[("codes",), _CODE],
    required=[("codes",), (*_CODE, "code"), (*_CODE, "meaning"), (*_CODE, "source")],
)

# -- a server record (serve stop, serve status: its pid is never signalled unproven; its name is its file's) ---


def _load_server_record(path: Path) -> Any:
    from ascend_setup.serve.server_records import load

    return load(path)


SERVER_RECORD = Kind(
    "server-record",
    "server-record",
    example=lambda: {
        "name": "dense",
        "pid": 4242,
        "start_ticks": 123456,
        "port": 8000,
        "cards": [0, 1],
        "log": "/w/serve/dense.log",
        "argv": ["vllm", "serve", "/m"],
        "detached": True,
        "started_at": 1764800000.5,
        "figures": "dense ready in 40 s",
        "env": {"HCCL_BUFFSIZE": "512"},
        "token": "0123456789abcdef0123456789abcdef",
    },
    path="wd/serve/dense.server.json",
    target="wd/serve/dense.server.json",
    load=_load_server_record,
    refused=raises_bad_input(_load_server_record),
    strings=[("name",), ("log",), ("argv", 0), ("figures",), ("env", "HCCL_BUFFSIZE"), ("token",)],
    numbers=[("pid",), ("start_ticks",), ("port",), ("cards", 0), ("started_at",)],
    booleans=[("detached",)],
    containers=[("cards",), ("argv",), ("env",)],
    required=[
        ("name",),
        ("pid",),
        ("start_ticks",),
        ("port",),
        ("cards",),
        ("log",),
        ("argv",),
        ("detached",),
        ("started_at",),
    ],
    keyed=[("env",)],
)

# -- a node inventory (doctor --nodes): ours, and a fleet's Ansible one (YAML: the JSON written is YAML) ------


def _load_inventory(path: Path) -> Any:
    from ascend_setup.nodes.inventory import load_inventory

    return load_inventory(path)


INVENTORY = Kind(
    "inventory",
    "inventory",
    example=lambda: {
        "nodes": [{"name": "a", "host": "10.0.0.2", "run": "ssh a", "command": ["ascend-setup"]}],
        "timeout": 5,
        "ping_timeout": 5,
        "clock_skew": 5,
        "ray": True,
        "ports": [8000],
    },
    path="nodes.yml",
    target="nodes.yml",
    load=_load_inventory,
    refused=raises_bad_input(_load_inventory),
    strings=[("nodes", 0, "name"), ("nodes", 0, "host")],
    numbers=[("timeout",), ("ping_timeout",), ("clock_skew",), ("ports", 0)],
    booleans=[("ray",)],
    containers=[("nodes",), ("nodes", 0), ("ports",)],
    required=[("nodes",), ("nodes", 0, "name")],
    keyed=[()],
)

ANSIBLE_INVENTORY = Kind(
    "ansible-inventory",
    "inventory",
    example=lambda: {
        "ascend": {
            "hosts": {"h1": {"ansible_host": "10.0.0.1", "ansible_user": "root", "ansible_port": 2222}},
            "vars": {"ascend_setup_command": ["ascend-setup"]},
            "children": {"more": {"hosts": {"h2": {"ansible_connection": "local"}}}},
        }
    },
    path="hosts.yml",
    target="hosts.yml",
    load=_load_inventory,
    refused=raises_bad_input(_load_inventory),
    strings=[
        ("ascend", "hosts", "h1", "ansible_host"),
        ("ascend", "hosts", "h1", "ansible_user"),
        ("ascend", "children", "more", "hosts", "h2", "ansible_connection"),
    ],
    containers=[
        ("ascend", "hosts"),
        ("ascend", "hosts", "h1"),
        ("ascend", "vars"),
        ("ascend", "children"),
        ("ascend", "children", "more"),
    ],
    keyed=[("ascend",), ("ascend", "hosts")],
)

# -- vLLM's serve flags (data/vllm_serve_flags.json, generated from the real parser): shipped, or a newer one -----


def _flags_example() -> Any:
    return {
        "source": "vllm 0.23.0",
        "vllm": "0.23.0",
        "python": "3.11",
        "flags": [
            {
                "options": ["--max-model-len"],
                "dest": "max_model_len",
                "action": "store",
                "nargs": None,
                "const": None,
                "type": "human_int_or_auto",
                "optional": True,
                "choices": None,
                "default": None,
            },
            {
                "options": ["--enable-prefix-caching", "--no-enable-prefix-caching"],
                "dest": "enable_prefix_caching",
                "action": "boolean_optional",
                "nargs": 0,
                "const": None,
                "type": "str",
                "optional": False,
                "choices": ["a"],
                "default": None,
            },
        ],
    }


def _load_flags(path: Path) -> Any:
    from ascend_setup.serve.flag_table import serve_flags

    return serve_flags(path)


VLLM_FLAGS = Kind(
    "vllm-flags",
    "vllm-flags",
    example=_flags_example,
    path="flags.json",
    target="flags.json",
    load=_load_flags,
    refused=raises_bad_input(_load_flags),
    strings=[
        ("source",),
        ("vllm",),
        ("python",),
        ("flags", 0, "dest"),
        ("flags", 0, "action"),
        ("flags", 0, "type"),
        ("flags", 0, "options", 0),
        ("flags", 1, "choices", 0),
    ],
    booleans=[("flags", 0, "optional")],
    containers=[("flags",), ("flags", 0), ("flags", 0, "options")],
    required=[("source",), ("flags",), ("flags", 0, "dest"), ("flags", 0, "action"), ("flags", 0, "type")],
)

KINDS_LOADED = [
    BUNDLE_MANIFEST,
    VLLM_FLAGS,
    CODES,
    INVENTORY,
    ANSIBLE_INVENTORY,
    PIP_ANSWER,
    PYTHON_BUILDS,
    FLEET_PLAY,
    FLEET_PLAIN,
    VENV_RECORD,
    FIT_CONFIG,
    MIRRORS,
    DIRECT_URL,
    HUB_CACHE,
    DOCTOR_STATE,
]
KINDS_LOADED += [SERVER_RECORD]

# -- bench's files: the published figures it ships (YAML), serve's result it reads, its own saved sweeps ------------


def _load_published(path: Path) -> Any:
    from ascend_setup.bench.verdict import load_published

    return load_published(path)


_FIG = ("figures", 0)
PUBLISHED = Kind(
    "published",
    "published",
    example=lambda: {
        "figures": [
            {
                "id": "pr1-tput",
                "source": "vllm-project/vllm-ascend#1",
                "model": "Qwen3-8B",
                "card": "910B3",
                "tp": 1,
                "concurrency": 20,
                "input_len": 128,
                "output_len": 128,
                "output_tok_s": 500.5,
                "tpot_ms": 30.5,
                "note": "a note",
            }
        ]
    },
    path="bench_published.yaml",
    target="bench_published.yaml",
    load=_load_published,
    refused=raises_bad_input(_load_published),
    strings=[(*_FIG, k) for k in ("id", "source", "model", "card", "note")],
    numbers=[(*_FIG, k) for k in ("tp", "concurrency", "input_len", "output_len", "output_tok_s", "tpot_ms")],
    containers=[("figures",), _FIG],
    required=[("figures",), *((*_FIG, k) for k in ("id", "source", "model", "card", "tp", "concurrency", "tpot_ms"))],
)


def _load_serve_result(path: Path) -> Any:
    from ascend_setup.bench.verdict import ServeResult
    from ascend_setup.utils.inputs import load_model

    return load_model(path, "serve-result", ServeResult, follow=False)


SERVE_RESULT = Kind(
    "serve-result",
    "serve-result",
    example=lambda: {"card": "910B3", "tp": 2, "tok_s": 60.5},
    path="wd/serve/dense.json",
    target="wd/serve/dense.json",
    load=_load_serve_result,
    refused=raises_bad_input(_load_serve_result),
    strings=[("card",)],
    numbers=[("tp",)],
    required=[("card",), ("tp",)],
)


def _load_bench_runs(path: Path) -> Any:
    from ascend_setup.bench.verdict import earlier_runs

    return earlier_runs(path)


BENCH_RUN = Kind(
    "bench-run",
    "bench-run",
    example=lambda: {
        "model": "dense",
        "command": "vllm serve /m",
        "input_len": 128,
        "output_len": 24,
        "measured_at": 1764800000.5,
        "levels": [{"concurrency": 4, "tpot_ms": 16.5}],
    },
    path="wd/bench/20260101T000000-000001.json",
    target="wd",
    load=_load_bench_runs,
    refused=raises_bad_input(_load_bench_runs),
    accepted=lambda loaded: len(loaded) == 1,
    strings=[("model",), ("command",)],
    numbers=[("input_len",), ("output_len",), ("measured_at",), ("levels", 0, "concurrency"), ("levels", 0, "tpot_ms")],
    containers=[("levels",), ("levels", 0)],
    required=[
        ("model",),
        ("command",),
        ("input_len",),
        ("output_len",),
        ("measured_at",),
        ("levels",),
        ("levels", 0, "concurrency"),
        ("levels", 0, "tpot_ms"),
    ],
)
KINDS_LOADED += [PUBLISHED, SERVE_RESULT, BENCH_RUN]


# -- the mutations ------------------------------------------------------------------------------------------------


def _set(doc: Any, key: Key, value: Any) -> Any:
    doc = copy.deepcopy(doc)
    *parents, last = key
    here = doc
    for k in parents:
        here = here[k]
    here[last] = value
    return doc


def _delete(doc: Any, key: Key) -> Any:
    doc = copy.deepcopy(doc)
    *parents, last = key
    here = doc
    for k in parents:
        here = here[k]
    del here[last]
    return doc


def _at(key: Key) -> str:
    return ".".join(str(k) for k in key)


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


def mutations(kind: Kind) -> Iterator[Tuple[str, Any]]:
    """(case, mutated document) for every field the kind declares; the document None marks the huge file."""
    doc = kind.example()
    for key in kind.strings:
        yield f"{_at(key)}=number", _set(doc, key, 12345)
        yield f"{_at(key)}=list", _set(doc, key, ["x"])
        yield f"{_at(key)}=nested", _set(doc, key, {"a": {"b": {"c": "d"}}})
    for key in kind.numbers:
        yield f"{_at(key)}=text", _set(doc, key, "12")
        yield f"{_at(key)}=huge", _set(doc, key, 10**30)
    for key in kind.booleans:
        yield f"{_at(key)}=text", _set(doc, key, "true")
    for key in kind.containers:
        yield f"{_at(key)}=text", _set(doc, key, "x")
    for key in kind.required:
        yield f"{_at(key)}=missing", _delete(doc, key)
    for key in kind.keyed:
        yield f"{_at(key)}=escape-key", _set(doc, (*key, ESCAPE), 5)
    for key in kind.names:
        for case, name in LEAVING.items():
            yield f"{_at(key)}={case}", _set(doc, key, name)
    first = kind.strings[0]
    yield f"{_at(first)}=deep", _set(doc, first, _deep(200))
    yield f"{_at(first)}=5000-digits", _set(doc, first, BIG)
    yield "huge-file", None


CASES = [pytest.param(kind, doc, id=f"{kind.name}:{case}") for kind in KINDS_LOADED for case, doc in mutations(kind)]


@pytest.mark.parametrize("kind", KINDS_LOADED, ids=lambda k: k.name)
def test_the_valid_example_loads(kind: Kind, tmp_path: Path) -> None:
    """The baseline: without it a refusal below could be the example's fault."""
    assert kind.accepted(kind.load(kind.place(tmp_path, json.dumps(kind.example()))))


@pytest.mark.parametrize(("kind", "doc"), CASES)
def test_each_mutation_is_refused_as_its_kind_promises(kind: Kind, doc: Any, tmp_path: Path) -> None:
    if doc is None:  # past the kind's size: a valid document padded (sparsely) to one byte over
        target = kind.place(tmp_path, json.dumps(kind.example()))
        limit = KINDS[kind.size_kind][1]
        assert limit is not None
        os.truncate(tmp_path / kind.path, limit + 1)
    else:
        target = kind.place(tmp_path, json.dumps(doc).replace(f'"{BIG}"', "9" * 5000))
    kind.refused(target)
