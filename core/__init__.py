"""The bottom of the house, above the warehouse's schemas and store: the plug-in registry (`registry`), default
paths (`paths`), the dataset's settings (`config`, `taskmine.toml`) and the stage contract every stage keeps
(`stage`: `RunContext` in, `StageResult` out).

Invariant: nothing here imports a package above it (extractors, privacy, environments, graders, task_builders,
publishing, taskmine, pipelines); built-in plug-ins are named as module strings and imported on first use.
"""
