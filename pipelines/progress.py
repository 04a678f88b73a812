"""The `progress` Dagster logger `taskmine run` turns on: one short line per finished stage, check and
validated task, instead of Dagster's debug log. The UI keeps Dagster's own console logger."""

import logging
import time

from dagster import Field, MarkdownMetadataValue, PathMetadataValue, TableMetadataValue, logger


class _ProgressHandler(logging.Handler):
    def __init__(self, started: float = 0.0, prefix: str = ""):
        super().__init__(logging.DEBUG)
        self.t0 = started or time.time()   # the command's start: every step process counts from the same moment
        self.prefix = prefix

    def _print(self, text: str) -> None:
        print(f"  {self.prefix}[{time.time() - self.t0:6.1f}s] {text}", flush=True)

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        event = meta.get("dagster_event")
        kind = getattr(event, "event_type_value", "")
        if kind == "ASSET_MATERIALIZATION":
            mat = event.event_specific_data.materialization
            shown = {k: getattr(v, "value", v) for k, v in mat.metadata.items()
                     if k not in ("preview", "funnel", "dataset_dir", "path")
                     and not isinstance(v, (MarkdownMetadataValue, PathMetadataValue, TableMetadataValue))}
            # tables, plots and paths are for the UI
            self._print(f"{mat.asset_key.to_user_string():<18} " + ", ".join(f"{k}={v}" for k, v in
                                                                            list(shown.items())[:6]))
        elif kind == "STEP_FAILURE":
            data = event.event_specific_data
            if data.user_failure_data and data.user_failure_data.description:  # pipelines.errors: one line
                message = data.user_failure_data.description
            else:
                cause = data.error.cause or data.error
                message = cause.message.strip().splitlines()[-1]
                if ": " in message and "." in message.split(": ", 1)[0]:  # "pkg.mod.Error: x" -> "Error: x"
                    message = message.split(": ", 1)[0].rsplit(".", 1)[-1] + ": " + message.split(": ", 1)[1]
            self._print(f"FAILED {meta.get('step_key')}: {message[:400]}")
        elif kind == "ASSET_CHECK_EVALUATION":
            ev = event.event_specific_data
            status = "ok" if ev.passed else ("warn" if ev.severity.value == "WARN" else "FAILED")
            why = f": {ev.description}" if not ev.passed and ev.description else ""
            self._print(f"check {ev.check_name:<20} {status}{why[:400]}")
        elif not kind and record.levelno >= logging.INFO and "Not executing" not in record.getMessage():
            self._print(f"  {meta.get('orig_message') or record.getMessage()}")


@logger(config_schema={"started": Field(float, default_value=0.0, description="epoch seconds the times count "
                                                                              "from (0: when the logger starts)"),
                       "prefix": Field(str, default_value="", description="put before every line (the dataset)")},
        description="Compact progress lines for the command line (`taskmine run`).")
def progress_logger(init_context):
    lg = logging.Logger("taskmine.progress", level=logging.DEBUG)
    cfg = init_context.logger_config or {}
    lg.addHandler(_ProgressHandler(cfg.get("started", 0.0), cfg.get("prefix", "")))
    return lg
