"""Prometheus metrics of a continuous runner (`reconcile run --continuous --metrics-port`).

Served by `prometheus_client` on its own registry, so only the runner's own series
appear: steps by result, rows each step changed per table, step durations, failures
in a row, when each pipeline last caught up (its lag is `time() - that`), which
state it is in, which input connectors a bad file holds, and each Kafka input's lag
per partition (records the broker holds that no step has ingested, asked of the broker
after each step).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from reconciler.operations.outcome import OutcomeKind

STATES = ("running", "paused", "failing")
StepRecord = OutcomeKind | Literal["paused", "failed"]
"""What a runner records of a step: the step's outcome, or that it was paused or failed."""


class RunnerMetrics:
    """The series a runner updates after each step of each pipeline."""

    def __init__(self, lags: Callable[[str], dict[str, dict[str, int] | None]] | None = None
                 ) -> None:
        self.registry = CollectorRegistry()
        self.lags = lags
        self.kafka_lag = Gauge("reconcile_kafka_lag_records", "Records a Kafka input's "
                               "partition holds that no step has ingested.",
                               ["pipeline", "connector", "partition"], registry=self.registry)
        self.steps = Counter("reconcile_steps", "Steps by pipeline and result "
                             "(stepped, idle, paused, failed).", ["pipeline", "result"],
                             registry=self.registry)
        self.rows = Counter("reconcile_rows_added", "Rows committed steps added to each "
                            "table (net of the step's deletions; a step that removed more "
                            "adds none).", ["pipeline", "table"], registry=self.registry)
        self.duration = Histogram("reconcile_step_duration_seconds", "Duration of committed "
                                  "steps.", ["pipeline"], registry=self.registry,
                                  buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900))
        self.failures = Gauge("reconcile_consecutive_failures", "Failed steps in a row.",
                              ["pipeline"], registry=self.registry)
        self.caught_up = Gauge("reconcile_last_caught_up_timestamp_seconds", "When a step last "
                               "found no input waiting or committed what was.", ["pipeline"],
                               registry=self.registry)
        self.state = Gauge("reconcile_runner_state", "1 for the state each pipeline is in.",
                           ["pipeline", "state"], registry=self.registry)
        self.held = Gauge("reconcile_input_held", "1 while a bad input file holds the "
                          "connector at its offset.", ["pipeline", "connector"],
                          registry=self.registry)
        self.was_held: dict[str, set[str]] = {}

    def serve(self, port: int, address: str) -> None:
        """Serve `/metrics` on `address:port` from a daemon thread."""
        start_http_server(port, addr=address, registry=self.registry)

    def record(self, pipeline: str, result: StepRecord, outcome: Any = None) -> None:
        """One step's result: `stepped`, `idle` or `input-failed` (with its outcome), `paused`
        or `failed`."""
        self.steps.labels(pipeline, result).inc()
        if outcome is not None:
            held = set(outcome.details.get("bad_input", {}))
            for connector in held | self.was_held.get(pipeline, set()):
                self.held.labels(pipeline, connector).set(1 if connector in held else 0)
            self.was_held[pipeline] = held
        if result in (OutcomeKind.STEPPED, OutcomeKind.IDLE):
            self.caught_up.labels(pipeline).set(time.time())
            self.failures.labels(pipeline).set(0)
        if result == "failed":
            self.failures.labels(pipeline).inc()
        if result == OutcomeKind.STEPPED and outcome is not None:
            self.duration.labels(pipeline).observe(outcome.details.get("seconds", 0.0))
            for table, rows in outcome.details.get("rows", {}).items():
                if rows > 0:
                    self.rows.labels(pipeline, table).inc(rows)
        for connector, lag in (self.lags(pipeline) if self.lags else {}).items():
            for partition, count in (lag or {}).items():
                self.kafka_lag.labels(pipeline, connector, partition).set(count)
        current = {"stepped": "running", "idle": "running", "input-failed": "running",
                   "paused": "paused", "failed": "failing"}[result]
        for state in STATES:
            self.state.labels(pipeline, state).set(1 if state == current else 0)
