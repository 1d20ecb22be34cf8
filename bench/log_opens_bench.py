"""Delta log opens per step: is each pinned version's log read once, or once per read?

Every pinned read, row count, change and commit lookup asks delta-rs to open a
table's log at some version (on S3: a listing of `_delta_log/` and reads of its
checkpoint and commits). A committed version never changes, so `DeltaTables`
keeps the versions it opened (`KEPT_VERSIONS`). This runs the orders example
(`examples/orders`: files connectors, aggregates maintained with deletions, a
delta output) through the real CLI, in process: `apply`, a first `run`, then one
`run` per new month of orders, and counts the opens of each command, with the
kept versions and with none kept (`KEPT_VERSIONS = 0`, every read opens its log).

Goal: a step with new input opens at most 0.7x the logs it opens with none kept.

Usage: `python bench/log_opens_bench.py`.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from click.testing import CliRunner  # noqa: E402

import reconciler.engine.delta.tables as delta_tables  # noqa: E402
from reconciler.cli.main import cli  # noqa: E402

GOAL = 0.7
MONTHS = ("2026-03.json", "2026-04.json")


class OpenCounter:
    """Counts the calls of `delta_tables.open_delta_rs`, the one door to a table's log."""

    def __init__(self) -> None:
        self.opens = 0
        self._original: Callable[..., Any] = delta_tables.open_delta_rs  # type: ignore[attr-defined]  # patched where it is used
        delta_tables.open_delta_rs = self._counted  # type: ignore[attr-defined]  # patched where it is used

    def _counted(self, *args: Any, **kwargs: Any) -> Any:
        self.opens += 1
        return self._original(*args, **kwargs)

    def command(self, project: Path, *args: str) -> int:
        """Run one `reconcile` command on `project`; the log opens it made."""
        self.opens = 0
        result = CliRunner().invoke(cli, ["-C", str(project), *args], catch_exceptions=False)
        if result.exit_code != 0:
            raise SystemExit(f"reconcile {' '.join(args)} failed:\n{result.output}")
        return self.opens


def opens_per_command(counter: OpenCounter, kept: int) -> dict[str, int]:
    """The orders example's commands, with `kept` versions kept, and their log opens."""
    delta_tables.KEPT_VERSIONS = kept
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch) / "orders"
        shutil.copytree(ROOT / "examples" / "orders", project,
                        ignore=shutil.ignore_patterns(".reconcile", "output"))
        opens = {"apply": counter.command(project, "apply", "--auto-approve"),
                 "run (first ingest)": counter.command(project, "run")}
        for month in MONTHS:
            shutil.copy(project / "incoming" / month, project / "data" / "orders" / month)
            opens[f"run ({month})"] = counter.command(project, "run")
        opens["run (nothing new)"] = counter.command(project, "run")
        return opens


def main() -> None:
    counter = OpenCounter()
    kept_default = delta_tables.KEPT_VERSIONS
    none_kept = opens_per_command(counter, 0)
    kept = opens_per_command(counter, kept_default)
    print(f"{'command':<24}{'none kept':>10}{f'{kept_default} kept':>10}{'ratio':>8}")
    ratios = []
    for command, without in none_kept.items():
        ratio = kept[command] / without if without else 1.0
        if command.startswith("run (") and without:
            ratios.append(ratio)
        print(f"{command:<24}{without:>10}{kept[command]:>10}{ratio:>8.2f}")
    worst = max(ratios)
    print(f"worst step with new input: {worst:.2f}x the opens with none kept "
          f"(goal <= {GOAL}x): {'met' if worst <= GOAL else 'NOT met'}")


if __name__ == "__main__":
    main()
