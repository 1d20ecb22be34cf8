"""The Spark side of the reconciler: the session, column types, and Delta storage.

Everything that starts a JVM or touches a Delta table lives here, so the
planning half of the package (parse, fingerprint, diff, render) can run, and be
tested, without Spark.
"""
