"""The ground issue 55's Kafka connectors stand on: a real broker on loopback
(`tests/kafka_broker.py`) and Spark's Kafka connector from the jar cache
(`engine/jars.kafka_set`), reading a bounded range of offsets as a step will (a batch read
with explicit `startingOffsets`/`endingOffsets`, which also works over Spark Connect)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kafka_broker import kafka_broker

SCRIPT = """
import json, os, sys
from pyspark.sql import SparkSession
from reconciler.engine.jars import fetch, kafka_set
from reconciler.engine.session import spark_conf

servers, topic = sys.argv[1:]
conf = spark_conf("local[2]", {}, s3a=False)
conf["spark.driver.extraClassPath"] += os.pathsep + os.pathsep.join(
    str(jar) for jar in fetch(kafka_set()))
builder = SparkSession.builder
for key, value in conf.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
one_partition = spark.range(10).coalesce(1)  # so offset n holds id n
(one_partition.selectExpr("to_json(named_struct('id', id)) AS value")
 .write.format("kafka").option("kafka.bootstrap.servers", servers).option("topic", topic)
 .save())
offsets = lambda n: json.dumps({topic: {"0": n}})
ranged = (spark.read.format("kafka").option("kafka.bootstrap.servers", servers)
          .option("subscribe", topic).option("startingOffsets", offsets(2))
          .option("endingOffsets", offsets(7)).load())
print(json.dumps(sorted([row.offset, json.loads(row.value)["id"]]
                        for row in ranged.collect())))  # five messages
"""


@pytest.mark.slow
def test_spark_reads_a_bounded_range_of_offsets_from_a_real_broker(tmp_path: Path) -> None:
    with kafka_broker(tmp_path) as broker:
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT, broker.bootstrap_servers, "events"],
            env={**os.environ, "SPARK_SUBMIT_OPTS": "-XX:TieredStopAtLevel=1"},
            capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 0, f"{result.stderr[-3000:]}\n{broker.log()}"
    assert json.loads(result.stdout.splitlines()[-1]) == [[n, n] for n in range(2, 7)]
