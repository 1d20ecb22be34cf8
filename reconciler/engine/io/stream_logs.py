"""What a failing input batch logs, silenced while one connector ingests.

The failure itself is not lost: the ingest raises it as one `ReconcileError`, chained to
Spark's exception (shown with `--debug`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

STREAM_LOGGER = "org.apache.spark.sql.execution.streaming"
TASK_FAILURE_LOGGERS = (STREAM_LOGGER, "org.apache.spark.executor.Executor",
                        "org.apache.spark.scheduler.TaskSetManager",
                        "org.apache.spark.sql.execution.datasources.FileFormatWriter",
                        "org.apache.spark.util.Utils")
PY4J_LOGGER = "py4j.clientserver"


@contextmanager
def quiet_stream_failure(spark: Any) -> Iterator[None]:
    """Silence what a failing batch logs, for the span of one connector's ingestion.

    Spark logs the terminated query at ERROR with the Java stack, each failed task
    and aborted write once more, and py4j the Python callback's exception; on a
    terminal that is dozens of lines before the one-line error the CLI prints (a bad
    input file names itself in that line). The failure is not lost: it is raised as
    a ReconcileError, chained to Spark's exception (shown with `--debug`).
    """
    py4j_logger = logging.getLogger(PY4J_LOGGER)
    py4j_level = py4j_logger.level
    py4j_logger.setLevel(logging.CRITICAL)
    restores = [_mute_jvm_logger(spark, name) for name in TASK_FAILURE_LOGGERS]
    try:
        yield
    finally:
        py4j_logger.setLevel(py4j_level)
        for restore in reversed(restores):
            restore()


def _mute_jvm_logger(spark: Any, name: str) -> Callable[[], None]:
    """Turn a log4j2 logger off in the driver's JVM; returns how to restore it.

    No-op where there is no driver JVM here (Spark Connect) or no log4j2 core.
    """
    try:
        log4j = spark._jvm.org.apache.logging.log4j
        configurator = log4j.core.config.Configurator
        previous = log4j.LogManager.getLogger(name).getLevel()
        configurator.setLevel(name, log4j.Level.OFF)
    except Exception:  # no JVM (Connect), or another logging backend
        return lambda: None
    return lambda: configurator.setLevel(name, previous)
