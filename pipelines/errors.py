"""Failures a person reads: one line that says what is wrong and what to do, in the CLI and in the Dagster UI.

A stage that raises shows, in the UI, a Dagster stack trace whose first line names Dagster's wrapper, not
the cause. Every asset body runs under `stage_errors`, which turns the exception into a `dagster.Failure`
whose description is the one line, and records that line as the run's `taskmine/error` tag (shown in the
Runs list and on the run page; `taskmine run` prints it). Errors the user can fix (a bad taskmine.toml, no
Docker daemon, a refused publish) drop the traceback; anything else keeps it as the cause, since it is a bug.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

ERROR_TAG = "taskmine/error"

# Exceptions a user can fix: the message is the whole story (by name: the library packages stay free of a
# shared base class and of dagster).
USER_ERRORS = frozenset({"UserError", "ConfigError", "NothingToIngest", "DatasetError", "LeakError",
                         "SandboxError", "SandboxUnavailable", "KeyError", "ModelError", "PublishRefused",
                         "DatasetBusy", "PoolConfigError", "HostLost"})


def one_line(exc: BaseException) -> str:
    """The first line of a user error's message; `Type: message` for anything else."""
    msg = str(exc).strip()
    if isinstance(exc, KeyError) and msg.startswith(("'", '"')):
        msg = msg[1:-1]
    if type(exc).__name__ not in USER_ERRORS:
        msg = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
    return (msg.splitlines() or [type(exc).__name__])[0][:1000]


def tag_run(context, line: str) -> None:
    """Record `line` as the run's failure reason (the first one wins: it is the cause of the rest)."""
    with contextlib.suppress(Exception):  # a tag is a courtesy; never let it hide the real failure
        run_id = context.run.run_id   # asset and asset-check contexts both have .run
        run = context.instance.get_run_by_id(run_id)
        if run is not None and ERROR_TAG not in run.tags:
            context.instance.add_run_tags(run_id, {ERROR_TAG: line})


@contextlib.contextmanager
def stage_errors(context) -> Iterator[None]:
    # dagster only when a stage fails: a CLI error prints without loading it
    from dagster import Failure

    try:
        yield
    except Failure as failure:
        tag_run(context, failure.description or "failed")
        raise
    except Exception as exc:
        line = one_line(exc)
        tag_run(context, line)
        known = type(exc).__name__ in USER_ERRORS
        raise Failure(description=line, allow_retries=False) from (None if known else exc)


def stage(fn):
    """Run an asset's body under `stage_errors` (keeps the signature Dagster reads for resources)."""

    @functools.wraps(fn)
    def wrapper(context, *args, **kwargs):
        with stage_errors(context):
            return fn(context, *args, **kwargs)

    return wrapper
