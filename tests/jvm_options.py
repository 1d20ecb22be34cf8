"""Java options for the JVMs the tests start: Spark's children and the run's own session.

Tests run many tiny jobs, where C1-only JIT (no C2 warm-up) and the serial GC start and
finish them faster; production keeps the JVM's defaults.
"""

from __future__ import annotations

FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""For a JVM that lives for one command or one test (a CLI's, a server's)."""

FAST_JVM_ENV = {"SPARK_SUBMIT_OPTS": FAST_JVM}
"""`FAST_JVM` for the JVM that `spark-submit` starts for a child process's session."""

SESSION_JVM = f"{FAST_JVM} -XX:ReservedCodeCacheSize=256m"
"""For the session a test worker keeps for the whole run. C1-only JIT shrinks the code
cache to 48 MB, and a worker's session, which runs every part of Spark and Delta the suite
touches, needs about 80 MB (`jcmd PID Compiler.codecache` near a run's end): at 48 MB it
sat at 90% full for the whole run, flushing compiled methods and compiling them again."""
