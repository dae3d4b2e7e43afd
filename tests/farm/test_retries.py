"""Prefect retries only transient errors; a flow's failure reaches the caller as the library's error."""

import pytest
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from datafarm.errors import BudgetSpent, TransientError
from tasks.farm_tasks import TRANSIENT_RETRIES

RETRIES = {**TRANSIENT_RETRIES, "retry_delay_seconds": 0}


def _flaky(error: BaseException, fail_times: int):
    calls = []

    @task(cache_policy=NO_CACHE, **RETRIES)
    def work() -> int:
        calls.append(1)
        if len(calls) <= fail_times:
            raise error
        return len(calls)

    @flow
    def run() -> int:
        return work()

    return run, calls


def test_a_transient_error_is_retried(prefect_harness):
    run, calls = _flaky(TransientError("provider answered 503: retry"), fail_times=2)
    assert run() == 3 and len(calls) == 3


def test_a_permanent_error_is_not_retried_and_reaches_the_caller_as_itself(prefect_harness):
    run, calls = _flaky(BudgetSpent("the build cap is spent: raise caps.build"), fail_times=1)
    with pytest.raises(BudgetSpent, match="raise caps.build"):
        run()
    assert len(calls) == 1


def test_a_bug_is_not_retried(prefect_harness):
    run, calls = _flaky(ZeroDivisionError("division by zero"), fail_times=1)
    with pytest.raises(ZeroDivisionError):
        run()
    assert len(calls) == 1


def test_every_task_that_retries_retries_only_transient_errors_and_none_caches():
    import importlib
    import pkgutil

    import tasks
    from prefect.tasks import Task
    from tasks.farm_tasks import retry_if_transient

    found = [t for info in pkgutil.iter_modules(tasks.__path__)
             for t in vars(importlib.import_module(f"tasks.{info.name}")).values() if isinstance(t, Task)]
    assert len(found) >= 6
    for t in found:
        assert t.retries == 0 or t.retry_condition_fn is retry_if_transient, t.name
        assert t.cache_policy is NO_CACHE, f"{t.name} caches its result outside the workspace"
