"""Clustering of work items: embeddings (`embed`), families, near-duplicates, splits.

Nothing is imported here: torch and the model load only when `task_builders.cluster.embed` is used."""
