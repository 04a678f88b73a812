"""The `llm` resource: one client per run, configured from Dagster config or the environment."""

from __future__ import annotations

from dagster import asset, materialize

from pipelines.definitions import defs
from pipelines.resources import LLMResource


def test_the_definitions_carry_an_llm_resource_with_no_model_by_default(monkeypatch):
    monkeypatch.delenv("TASKMINE_LLM_MODEL", raising=False)
    resource = defs.resources["llm"]
    assert isinstance(resource, LLMResource)
    assert resource.enabled is False and resource.llm_config().api_key_env == "TASKMINE_LLM_API_KEY"
    monkeypatch.setenv("TASKMINE_LLM_MODEL", "openai/some-model")
    assert resource.enabled is True and resource.llm_config().model == "openai/some-model"


def test_each_run_gets_its_own_client_and_budget(llm_standin, tmp_path, monkeypatch):
    """Uses a stand-in for a hosted LLM (the `llm_standin` fixture, tests/llm/standin.py): an asset asks one
    question per run; the second run has a fresh usage ledger and is answered from the cache."""
    from standin import anon

    monkeypatch.setenv("TASKMINE_STANDIN_KEY", "sk-from-env")
    seen = []

    @asset
    def asks(llm: LLMResource) -> None:
        client = llm.client()
        assert client is llm.client()
        client.complete([("user", anon("When does the release go out?"))])
        seen.append(client.usage)

    resource = LLMResource(model="openai/standin", api_base=llm_standin.url, api_key_env="TASKMINE_STANDIN_KEY",
                           cache_dir=str(tmp_path / "cache"), budget_usd=None)
    for _ in range(2):
        assert materialize([asks], resources={"llm": resource}).success
    assert [(u.calls, u.cached) for u in seen] == [(1, 0), (0, 1)]
    assert llm_standin.count == 1 and llm_standin.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_run_config_sets_the_model(monkeypatch):
    """The README's Dagster run config reaches the run's client (no call is made)."""
    from dagster import Definitions, define_asset_job

    monkeypatch.delenv("TASKMINE_LLM_MODEL", raising=False)
    seen = {}

    @asset
    def configured(llm: LLMResource) -> None:
        seen["llm"] = llm.client()

    job = Definitions(assets=[configured], jobs=[define_asset_job("j")],
                      resources={"llm": LLMResource()}).resolve_job_def("j")
    config = {"model": "openai/qwen2.5-7b-instruct", "api_base": "http://127.0.0.1:8000/v1", "budget_usd": 2.0}
    assert job.execute_in_process(run_config={"resources": {"llm": {"config": config}}}).success
    client = seen["llm"]
    assert client.enabled and client.describe() == "openai/qwen2.5-7b-instruct at http://127.0.0.1:8000/v1"
    assert client.config.budget_usd == 2.0 and client.config.api_key_env == "TASKMINE_LLM_API_KEY"
