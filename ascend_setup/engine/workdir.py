"""Every path under the workdir, named once: the state, the logs, the run lock, the lock (the resolved package
locks) and its slices, the build's trees, the wheelhouse and the downloads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ascend_setup.engine.run_files import RunFiles


@dataclass(frozen=True)
class Workdir(RunFiles):
    """The workdir on the persistent disk (`root`): the engine's files (state, run lock, logs) and the names
    of what an install keeps there."""

    @property
    def lock_dir(self) -> Path:
        """The lock: one resolution per target. The pre-lock versions kept the run lock in a file of this name."""
        return self.root / "lock"

    def slice_file(self, name: str) -> Path:
        """The hash-pinned requirements file one step installs from (its slice of the lock, for one index)."""
        return self.lock_dir / "slices" / f"{name}.txt"

    @property
    def src(self) -> Path:
        """The vllm-ascend sdist and its build trees (built in place, so a retry is incremental)."""
        return self.root / "src"

    @property
    def wheelhouse(self) -> Path:
        return self.root / "wheelhouse"

    @property
    def downloads(self) -> Path:
        return self.root / "downloads"

    @property
    def third_party(self) -> Path:
        """The build's third-party archives (a user may copy them here for an offline build)."""
        return self.downloads / "third-party"

    @property
    def pythons(self) -> Path:
        """Managed interpreters (UV_PYTHON_INSTALL_DIR): on the persistent disk, since a venv names its
        interpreter's path and dies with it."""
        return self.root / "python"

    @property
    def build_home(self) -> Path:
        """HOME for the vllm-ascend build, so its tools' caches stay on the persistent disk."""
        return self.root / "build-home"

    @property
    def venv(self) -> Path:
        """The default venv."""
        return self.root / "venv"
