"""Seeds simulate side by side (the `rollout_workers` setting), each in its own sandbox, and are committed
in seed order: the episodes are the same whatever the number of workers. On a cluster runner the renders
and reviews run in its processes too."""

import contextlib
import os
import shutil

import numpy as np
import pytest

from datafarm.farm.episodes import PROCESS_SANDBOX, STAGING, attempts, episode_dir, kept_episodes
from datafarm.workspace import Workspace


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["threads", "dask", "ray", "dask-cluster-address"])
def test_any_runner_and_worker_count_simulates_the_same_episodes(farmed_workspace, tmp_path, runner):
    """The fixture farmed one seed at a time; two threads, local Dask and Ray clusters of two processes, and an
    existing Dask cluster reached by its address make the same episodes from the same seeds, and render and
    review them alike."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterFlowRunId

    from datafarm.workspace.workspace import this_process
    from flows.farm import episodes_flow

    farmed = Workspace.open(farmed_workspace)
    assert farmed.meta["settings"].get("rollout_workers", 1) == 1  # the fixture farmed one seed at a time
    root = tmp_path / "ws"
    shutil.copytree(farmed_workspace, root)
    for done in ("episodes", "rollout", "dataset", "manifest.json", ".sandbox", "timings.jsonl"):
        shutil.rmtree(root / done) if (root / done).is_dir() else (root / done).unlink()
    workspace = Workspace.open(root)
    with contextlib.ExitStack() as cluster:
        settings = {"rollout_workers": 2, "rollout_runner": runner}
        if runner == "dask-cluster-address":  # a cluster already running; its workers are told the flow's API
            from distributed import LocalCluster

            api = {"PREFECT_API_URL": str(get_client(sync_client=True).api_url)}
            existing = cluster.enter_context(LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                                          dashboard_address=None, env=api))
            settings.update(rollout_runner="dask", cluster_address=existing.scheduler_address)
        workspace.meta["settings"].update(settings)
        workspace.save_meta()
        run = episodes_flow(str(root), return_state=True)
        if runner == "dask-cluster-address":  # that cluster's worker processes did the work
            from distributed import Client

            with Client(existing) as client:
                workers = set(client.run(os.getpid).values())
            assert {int(row["process"].rsplit(":", 1)[1]) for row in workspace.timings()} <= workers
    assert run.is_completed()

    assert [(a.seed, a.accepted, a.index) for a in attempts(workspace)] == \
        [(a.seed, a.accepted, a.index) for a in attempts(farmed)]
    assert kept_episodes(workspace) == kept_episodes(farmed) == [0, 1]
    for index in kept_episodes(farmed):
        one, two = (np.load(w.path(episode_dir(index), "sim", "data.npz")) for w in (workspace, farmed))
        assert one.files == two.files
        for name in one.files:
            np.testing.assert_array_equal(one[name], two[name], err_msg=f"episode {index}: {name}")
        one, two = ({k: v for k, v in w.read_json(f"{episode_dir(index)}/result.json").items() if k != "wall_seconds"}
                    for w in (workspace, farmed))
        assert one == two
        one, two = (w.read_json(f"{episode_dir(index)}/render/appearance.json") for w in (workspace, farmed))
        assert one == two
        one, two = (w.read_json(f"{episode_dir(index)}/review.json") for w in (workspace, farmed))
        assert one["admitted"] and [(c["name"], c["passed"]) for c in one["checks"]] == \
            [(c["name"], c["passed"]) for c in two["checks"]]
    assert not any(workspace.path(STAGING).iterdir())  # every staged seed was committed
    assert not farmed.path(".sandbox", "rollout-1").exists()
    if runner == "threads":  # two seeds ran at once, each in its own sandbox
        assert workspace.path(".sandbox", "rollout-1").is_dir()
    else:  # one sandbox folder per cluster worker process, whichever seeds it ran
        assert 1 <= len(list(workspace.path(".sandbox").glob(f"{PROCESS_SANDBOX}*"))) <= 2
    # every rollout's task run is in the flow's own Prefect API, wherever it ran (a cluster's processes
    # would otherwise start embedded servers of their own)
    with get_client(sync_client=True) as client:
        tasks = client.read_task_runs(task_run_filter=TaskRunFilter(
            flow_run_id=TaskRunFilterFlowRunId(any_=[run.state_details.flow_run_id])))
    done = sorted(task.name for task in tasks if task.state.is_completed())
    assert [name for name in done if name.startswith("rollout seed")] == \
        sorted(f"rollout seed {a.seed}" for a in attempts(workspace))
    assert [name for name in done if name.startswith(("render", "review"))] == \
        ["render episode 0", "render episode 1", "review episode 0", "review episode 1"]
    # where the work ran: this process's threads (the simulations in their sandboxes), or a cluster's processes
    ran = {(row["phase"], row["process"] == this_process()) for row in workspace.timings()}
    assert ran == {(phase, runner == "threads") for phase in ("rollout", "render", "review")}


@pytest.mark.parametrize("extra", ["dask", "ray"])
def test_a_cluster_runner_not_installed_says_how_to_install_it(monkeypatch, extra):
    import sys

    from datafarm.errors import Unavailable
    from datafarm.farm.settings import FarmSettings
    from flows.farm import rollout_runner

    monkeypatch.setitem(sys.modules, f"prefect_{extra}", None)  # as if not installed
    with pytest.raises(Unavailable, match=rf"pip install 'datafarm\[{extra}\]'"):
        rollout_runner(FarmSettings(target_count=1, rollout_runner=extra))
    with pytest.raises(ValueError, match="cluster_address is a setting of rollout_runner dask or ray"):
        FarmSettings(target_count=1, cluster_address="tcp://127.0.0.1:8786")
