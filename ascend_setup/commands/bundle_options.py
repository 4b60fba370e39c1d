"""`bundle`'s options model, apart from its command: it is built on the bundle room's `BundleOptions`, which
`bundle --help` must not load; the parser names it lazily (`LazyOptions`)."""

from __future__ import annotations

from typing import Optional

from typing_extensions import Literal

from ascend_setup.bundle.bundle_request import BundleOptions
from ascend_setup.cli.command import Options


class BundleCommandOptions(BundleOptions, Options):
    """`bundle` and `bundle verify PATH` (argparse parses verify's line under bundle's flags)."""

    bundle_command: Optional[Literal["verify"]] = None
    path: Optional[str] = None  # bundle verify's PATH
    matrix: Optional[str] = None  # type: ignore[assignment]  # as given: its errors name it so
