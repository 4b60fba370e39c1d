"""A pipeline of real steps (files, subprocesses) for the SIGKILL test; run as a child process.

Every step appends 'start NAME' to events.log (fsynced) when its run begins, so the test can see
which steps ran in each attempt.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

from pydantic import BaseModel

from ascend_setup.engine.run_files import RunFiles
from ascend_setup.engine.runner import Runner
from ascend_setup.engine.session import Session
from ascend_setup.engine.step import Step
from ascend_setup.utils.files import atomic_write_text

CHUNKS = 25


def event(workdir: Path, text: str) -> None:
    with open(workdir / "events.log", "a") as handle:
        handle.write(text + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def expected_chunk(i: int) -> str:
    return hashlib.sha256(f"chunk {i}".encode()).hexdigest() * 40


class Chunks(BaseModel):
    count: int


class Digested(BaseModel):
    digest: str


class WriteChunks(Step[Chunks]):
    """write chunk files one at a time"""

    name = "write-chunks"
    Output = Chunks

    def inputs(self, ctx):
        return {"chunks": CHUNKS}

    def is_done(self, ctx):
        return all(
            (ctx.root / "chunks" / f"{i}.txt").is_file()
            and (ctx.root / "chunks" / f"{i}.txt").read_text() == expected_chunk(i)
            for i in range(CHUNKS)
        )

    def run(self, ctx, log):
        event(ctx.root, f"start {self.name}")
        out = ctx.root / "chunks"
        out.mkdir(exist_ok=True)
        for i in range(CHUNKS):
            target = out / f"{i}.txt"
            if target.is_file() and target.read_text() == expected_chunk(i):
                continue
            atomic_write_text(target, expected_chunk(i))
            time.sleep(0.02)
        return Chunks(count=CHUNKS)


class Digest(Step[Digested]):
    """hash the chunks in a subprocess"""

    name = "digest"
    depends_on = ("write-chunks",)
    Output = Digested

    def is_done(self, ctx):
        return (ctx.root / "digest.txt").is_file()

    def run(self, ctx, log):
        event(ctx.root, f"start {self.name}")
        code = (
            "import hashlib,pathlib,sys,time\n"
            "d=pathlib.Path(sys.argv[1]); h=hashlib.sha256()\n"
            "for i in range(int(sys.argv[2])):\n"
            "    h.update((d/'chunks'/f'{i}.txt').read_bytes()); time.sleep(0.01)\n"
            "tmp=d/'digest.tmp'; tmp.write_text(h.hexdigest()); tmp.replace(d/'digest.txt')\n"
        )
        with log.open("a") as handle:
            subprocess.run(
                [sys.executable, "-c", code, str(ctx.root), str(ctx.get(WriteChunks).count)],
                check=True,
                stdout=handle,
                stderr=subprocess.STDOUT,
            )
        return Digested(digest=(ctx.root / "digest.txt").read_text())


class Report(Step):
    """write the final report from the digest"""

    name = "report"
    depends_on = ("digest",)

    def is_done(self, ctx):
        return (ctx.root / "report.txt").is_file()

    def run(self, ctx, log):
        event(ctx.root, f"start {self.name}")
        time.sleep(0.2)
        atomic_write_text(ctx.root / "report.txt", f"digest={ctx.get(Digest).digest}\n")


def pipeline():
    return [WriteChunks(), Digest(), Report()]


if __name__ == "__main__":
    workdir = Path(sys.argv[1])
    Runner(pipeline(), Session(RunFiles(workdir))).run()
