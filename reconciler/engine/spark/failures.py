"""Spark dying under a command, said in one line.

An `OutOfMemoryError`, a JVM killed by the kernel, a lost executor or a Spark
Connect server that went away surface as pages of Java and Python tracebacks.
The CLI asks `engine_failure` for one line instead: what died, during which
stage and object, and the setting to change. The lock is released and the last
committed manifest is untouched either way (nothing commits on these paths);
`--debug` still shows everything. Errors are recognised by class name and text
only, so importing this module needs no pyspark.
"""

from __future__ import annotations

from reconciler.support.errors import ReconcileError

_BROADCAST = "Not enough memory to build and broadcast the table"
_OUT_OF_MEMORY = ("OutOfMemoryError", "Java heap space", "GC overhead limit exceeded")
_JVM_GONE = ("Py4JNetworkError", "Answer from Java side is empty", "Connection refused",
             "Error while receiving", "Error while sending", "Java gateway process exited",
             "SparkContext was shut down", "SparkContext has been shutdown",
             "Cannot call methods on a stopped SparkContext",
             "does not exist in the JVM")  # py4j's answer to any call once the JVM is gone
_EXECUTOR_LOST = ("ExecutorLostFailure", "Executor heartbeat timed out", "executor lost")
_CONNECT_GONE = ("SparkConnectGrpcException", "StatusCode.UNAVAILABLE", "failed to connect to all")


def engine_failure(error: BaseException, during: str | None) -> ReconcileError | None:
    """One line for a Spark failure that is about resources, not about the pipeline."""
    text = " | ".join(f"{type(link).__name__}: {link}" for link in _chain(error))
    where = f" while {during}" if during else ""
    from_spark = _from_spark(error)
    if not from_spark:
        return None
    if _BROADCAST in text:
        return ReconcileError(f"Spark had too little driver memory to broadcast a join's "
                              f"smaller side{where}; raise spark.driver.memory, or lower "
                              "spark.sql.autoBroadcastJoinThreshold (-1 turns it off)")
    if any(sign in text for sign in _OUT_OF_MEMORY):
        return ReconcileError(f"Spark ran out of memory{where}; give it more with "
                              "spark.driver.memory (embedded Spark, or the driver) or "
                              "spark.executor.memory (a cluster's executors)")
    if any(sign in text for sign in _EXECUTOR_LOST):
        return ReconcileError(f"Spark lost an executor{where} (killed, or out of memory); "
                              "check the cluster, or raise spark.executor.memory")
    if any(sign in text for sign in _CONNECT_GONE):
        return ReconcileError(f"lost the Spark Connect server{where}; check that it runs "
                              "and is reachable, then run the command again")
    # A bare Py4JError (a Py4JJavaError would carry the Java exception) is py4j's answer
    # to a call the JVM could not even fail properly: it was being killed.
    bare = type(error).__name__ == "Py4JError" and str(error).startswith(
        "An error occurred while calling")
    if bare or any(sign in text for sign in _JVM_GONE):
        return ReconcileError(f"the Spark JVM died{where} (killed, or out of memory: raise "
                              "spark.driver.memory); nothing was committed, run the command "
                              "again")
    return None


def _chain(error: BaseException) -> list[BaseException]:
    """The error and what it was raised from or during: py4j reports a call on a JVM that
    just died as `Py4JError: An error occurred while calling o49.read`, raised while
    handling the `Py4JNetworkError` that says what happened."""
    chain: list[BaseException] = []
    link: BaseException | None = error
    while link is not None and link not in chain and len(chain) < 8:
        chain.append(link)
        link = link.__cause__ or link.__context__
    return chain


def _from_spark(error: BaseException) -> bool:
    """Raised by Spark's client libraries (py4j, pyspark, grpc), judged by the error's class
    or by where it was raised: a dead JVM can surface as a plain ConnectionRefusedError."""
    if type(error).__module__.split(".")[0] in ("py4j", "pyspark", "grpc"):
        return True
    trace = error.__traceback__
    while trace is not None:
        if any(part in trace.tb_frame.f_code.co_filename
               for part in ("/py4j/", "/pyspark/", "/grpc/")):
            return True
        trace = trace.tb_next
    return False
