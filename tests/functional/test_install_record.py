"""The install's options are one model: what `install` is given is what state.json records and what `resume`
runs with, with no list of fields to keep in step by hand."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Dict, List

import pytest

from ascend_setup.cli.main import build_parser, refuse_empty_values
from ascend_setup.cli.render import Output
from ascend_setup.commands import install
from ascend_setup.commands.install_options import InstallCommandOptions
from ascend_setup.engine.workdir import Workdir
from ascend_setup.steps.install_session import install_store
from ascend_setup.steps.options import InstallOptions, InstallRow, resolve_install


def parsed(argv: List[str]) -> InstallCommandOptions:
    parser = build_parser(["install"])
    args = parser.parse_args(["install", *argv])
    refuse_empty_values(args, parser)
    options = args.options.from_namespace(args)
    assert isinstance(options, InstallCommandOptions)
    return options


def test_every_recorded_option_is_an_install_flag() -> None:
    """The record is the flags' model less what only one run is asked: a flag's field is recorded by itself."""
    recorded, command = set(InstallOptions.model_fields), set(InstallCommandOptions.model_fields)
    assert recorded <= command
    assert command - recorded == {"dry_run", "yes", "json_output"}


def test_resume_replays_the_python_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = tmp_path / "wd"
    workdir.mkdir()
    given = parsed(["--cann", "9.1.0", "--workdir", str(workdir), "--python-mirror", "https://pbs.example/r"])
    recorded, _ = resolve_install(given, dry_run=False)
    assert recorded.python_mirror == "https://pbs.example/r"
    store = install_store(Workdir(workdir))
    state = store.empty()
    state.options = recorded.record()
    store.save(state)

    ran: Dict[str, Any] = {}

    def execute(options: InstallOptions, loaded: InstallRow, output: Output, **how: bool) -> install.Result:
        ran.update(options=options, **how)
        return install.Result(0)

    monkeypatch.setattr(install, "execute", execute)
    install.run_resume(install.ResumeOptions(workdir=str(workdir)), Output(False))
    assert ran["options"] == recorded and ran["options"].python_mirror == "https://pbs.example/r"


@pytest.mark.parametrize(
    "argv, field, value",
    [
        (["--python-mirror", "https://pbs.example/r"], "python_mirror", "https://pbs.example/r"),
        (["--installer", "pip"], "installer", "pip"),
        (["--mirror", "http://m.example/simple"], "mirror", "http://m.example/simple/"),
        (["--index", "ascend=http://a.example/simple"], "indexes", {"ascend": "http://a.example/simple/"}),
        (["--extra-index-url", "http://e.example/simple"], "extra_index_urls", ["http://e.example/simple/"]),
        (["--soc", "Ascend910B3"], "soc", "ascend910b3"),
        (["--jobs", "3"], "jobs", 3),
        (["--build-deps-url", "https://d.example/x"], "build_deps_url", "https://d.example/x"),
        (["--resume-on-login"], "resume_on_login", True),
        (["--force"], "force", True),
    ],
)
def test_a_flag_survives_the_state_file(tmp_path: Path, argv: List[str], field: str, value: object) -> None:
    """Checked and normalised once, as the flag is parsed; the record reads back as the same model."""
    recorded, _ = resolve_install(parsed(["--cann", "9.1.0", "--workdir", str(tmp_path / "wd"), *argv]), dry_run=True)
    assert getattr(recorded, field) == value
    assert InstallOptions.from_record(recorded.record()) == recorded


def test_a_bad_flag_value_is_refused_as_it_is_parsed() -> None:
    from ascend_setup.errors import BadInput

    with pytest.raises(BadInput, match="--python-mirror 'ftp://x' is not an http"):
        parsed(["--cann", "9.1.0", "--python-mirror", "ftp://x"])
    with pytest.raises(BadInput, match="--installer"):
        parsed(["--cann", "9.1.0", "--installer", "conda"])


def test_the_installer_is_one_type() -> None:
    """The parser's choices, the model's Literal and the default are one definition."""
    from typing_extensions import get_args

    from ascend_setup.utils.installer_name import DEFAULT_INSTALLER, INSTALLERS, InstallerName

    action = next(a for a in build_parser(["install"])._subparsers._group_actions[0].choices["install"]._actions
                  if a.dest == "installer")  # fmt: skip
    assert tuple(action.choices) == INSTALLERS == get_args(InstallerName)
    assert action.default == DEFAULT_INSTALLER == InstallOptions.model_fields["installer"].default
    assert isinstance(action, argparse.Action)
