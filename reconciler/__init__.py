"""pipeline-reconciler: plan and apply changes to continuous Spark SQL pipelines.

Layers, each behind a small interface: spec (project files) -> program (parsed,
fingerprinted relations) -> diff (checkpointed vs desired) -> plan (actions and
reasons) -> apply (bootstrap on the engine, commit the manifest to a backend).
"""

__version__ = "0.1.0"
