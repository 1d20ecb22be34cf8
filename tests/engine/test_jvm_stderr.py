"""The JVM's stderr reaches ours less the one line no user can act on: Spark 4's launcher
always passes `--add-modules jdk.incubator.vector`, and the JVM then prints
`WARNING: Using incubator modules: jdk.incubator.vector` at start (engine/spark/session.py)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from reconciler.engine.spark.launch import INCUBATOR_WARNING, _IncubatorWarningFilter, jvm_launch


def filtered(chunks: list[bytes], tmp_path: Path) -> bytes:
    source, sink = os.pipe()
    target = tmp_path / "stderr"
    with target.open("wb") as out:
        thread = _IncubatorWarningFilter(source, os.dup(out.fileno()))
        thread.start()
        for chunk in chunks:
            os.write(sink, chunk)
            time.sleep(0.01)  # separate reads, so a line start is split across them
        os.close(sink)
        thread.join(timeout=10)
    return target.read_bytes()


@pytest.mark.parametrize(("chunks", "expected"), [
    ([INCUBATOR_WARNING + b"next\n"], b"next\n"),
    ([INCUBATOR_WARNING[:9], INCUBATOR_WARNING[9:], b"next"], b"next"),
    ([b"[0.004s][info][gc] Using G1\n", INCUBATOR_WARNING, b"26/11/26 ERROR x\n"],
     b"[0.004s][info][gc] Using G1\n26/11/26 ERROR x\n"),
    ([b"in a line: " + INCUBATOR_WARNING], b"in a line: " + INCUBATOR_WARNING),
    ([b"WARN", b"ING: something else\n"], b"WARNING: something else\n"),
    ([b"\r| progress", b" 50%"], b"\r| progress 50%"),
    ([b"WARNING: Using"], b"WARNING: Using"),  # the end of the stream is passed on
])
def test_filter_drops_exactly_the_incubator_line(chunks: list[bytes], expected: bytes,
                                                 tmp_path: Path) -> None:
    assert filtered(chunks, tmp_path) == expected


def test_a_process_launched_like_the_jvm_writes_to_stderr_without_the_warning(
        capfd: pytest.CaptureFixture[str]) -> None:
    script = ("printf 'WARNING: Using incubator modules: jdk.incubator.vector\\n'; "
              "echo to-stdout; echo to-stderr >&2")
    with jvm_launch():
        child = subprocess.Popen(["sh", "-c", script])
    assert child.wait(timeout=30) == 0
    out, err = "", ""
    deadline = time.monotonic() + 10
    while "to-stderr" not in err and time.monotonic() < deadline:
        captured = capfd.readouterr()
        out, err = out + captured.out, err + captured.err
        time.sleep(0.05)
    assert out == ""  # the JVM's stdout is our stderr: stdout is the command's own
    assert "to-stdout\n" in err and "to-stderr\n" in err
    assert "incubator" not in err
