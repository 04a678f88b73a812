"""What labs receive, written and read back: the publish stage and its gates (`stages`), the dataset folder a
version is (`publish`: agent view, grader view, trajectories, SWE-bench instances, the world, manifest), its card
(`card`), SWE-bench's columns (`swe`), and the consumer-side loader that reads a version back, serves its tools
and grades a rollout (`loader`).

One package for both directions of the published layout: the writer and the reader share its constants, and it
sits above every stage whose output it packs (graders, environments, privacy's audit), so nothing below imports
it. The warehouse keeps only what every stage reads and writes (schemas, store, ids, locks).
"""
