"""Issue 78.4: Maven fetches the jars from a private base folder of its own, obeying no `.mvn/`
planted above it.

`mvn` walks up from its working directory to the first folder holding `.mvn/` and reads
`jvm.config` (options of Maven's own JVM: `-javaagent:` runs code), `maven.config` and
`extensions.xml` there. The fetch ran it in a fresh folder under `$TMPDIR`, so any local
user could plant `/tmp/.mvn/jvm.config` and run code as whoever fetched jars next, then
poison the jar cache every JVM loads. Here `$TMPDIR` and the working directory both hold a
`.mvn/` that would make Maven fail loudly if read (a 1 KiB heap, an unknown option, an
extensions file that does not parse), and a real fetch of one small jar (resolved from the
jar cache's Maven repository, already filled by `make jars`) must succeed.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.engine.spark.jars import cached, repository, slf4j_binding_set

FETCH = ("from reconciler.engine.spark.jars import fetch, slf4j_binding_set\n"
         "print(*fetch(slf4j_binding_set()))\n")


def plant_maven_config(folder: Path) -> None:
    """A `.mvn/` any local user could leave in a shared temporary folder."""
    planted = folder / ".mvn"
    planted.mkdir(parents=True)
    (planted / "jvm.config").write_text("-Xmx1k -javaagent:/nonexistent/agent.jar\n")
    (planted / "maven.config").write_text("--no-such-option-planted\n")
    (planted / "extensions.xml").write_text("<extensions><not-closed>\n")


def test_maven_reads_no_mvn_folder_above_its_working_directory(tmp_path: Path) -> None:
    if shutil.which("mvn") is None or cached(slf4j_binding_set()) is None:
        pytest.skip("needs Maven and the jar cache `make jars` fills (resolved offline)")
    shared_tmp, checkout, jars = tmp_path / "tmp", tmp_path / "checkout", tmp_path / "jars"
    plant_maven_config(shared_tmp)
    plant_maven_config(checkout)
    jars.mkdir()
    (jars / "maven").symlink_to(repository(), target_is_directory=True)  # nothing downloaded

    result = subprocess.run(
        [sys.executable, "-P", "-c", FETCH], capture_output=True, text=True, timeout=600,
        check=False, cwd=checkout, stdin=subprocess.DEVNULL,
        env=os.environ | {"TMPDIR": str(shared_tmp), "RECONCILE_JARS": str(jars)})

    assert result.returncode == 0, result.stderr + result.stdout
    fetched = Path(result.stdout.strip())
    assert fetched.name.startswith("log4j-slf4j-impl-") and fetched.is_file()
    assert fetched.is_relative_to(jars / "maven")
    leftovers = [path.name for path in jars.iterdir()
                 if path.name not in ("maven", slf4j_binding_set().folder_name)]
    assert leftovers == [], "Maven's base folder is removed after the fetch"
    assert sorted(path.name for path in (shared_tmp / ".mvn").iterdir()) == [
        "extensions.xml", "jvm.config", "maven.config"]


def test_mavens_base_folder_is_private_and_has_its_own_mvn_folder(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    """What Maven is run with, without running it: its working directory is a folder of the
    jar cache only its owner may enter, holding an empty `.mvn/` (where Maven's walk up
    stops) and the generated POM, named with `-f`."""
    from reconciler.engine.spark import jars as jars_module

    monkeypatch.setenv("RECONCILE_JARS", str(tmp_path / "jars"))
    seen: dict[str, object] = {}

    def fake_mvn(argv: list[str], *, cwd: Path | None = None,
                 timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        assert cwd is not None
        seen.update(argv=argv, cwd=cwd, mode=stat.S_IMODE(cwd.stat().st_mode),
                    mvn=sorted(os.listdir(cwd / ".mvn")), parent=cwd.parent)
        listing = next(arg for arg in argv if arg.startswith("-Dmdep.outputFile="))
        Path(listing.partition("=")[2]).write_text(str(tmp_path / "a.jar"))
        (tmp_path / "a.jar").write_bytes(b"")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(jars_module, "run_helper", fake_mvn)
    jars_module.fetch(slf4j_binding_set())
    cwd = seen["cwd"]
    assert isinstance(cwd, Path) and seen["parent"] == tmp_path / "jars"
    assert seen["mode"] == 0o700 and seen["mvn"] == []
    argv = seen["argv"]
    assert isinstance(argv, list) and argv[argv.index("-f") + 1] == str(cwd / "pom.xml")
    assert not cwd.exists()
