import time

import pytest

from datafarm.costs import CostLedger
from datafarm.workspace import Workspace, WorkspaceError


@pytest.fixture
def workspace(tmp_path):
    return Workspace.initialise(tmp_path / "ws", {"settings": {"target_count": 1}})


def test_opening_a_folder_that_is_not_a_workspace_says_how_to_make_one(tmp_path):
    with pytest.raises(WorkspaceError, match="datafarm prepare"):
        Workspace.open(tmp_path)


def test_a_workspace_is_not_overwritten(workspace):
    with pytest.raises(WorkspaceError, match="already holds a workspace"):
        Workspace.initialise(workspace.root, {})


def test_writes_are_atomic_and_leave_no_temporary_files(workspace):
    workspace.write_json("a/b.json", {"x": 1})
    assert workspace.read_json("a/b.json") == {"x": 1}
    assert [p.name for p in workspace.path("a").iterdir()] == ["b.json"]


def test_a_phase_is_current_only_with_the_same_inputs_and_intact_outputs(workspace):
    workspace.write_text("out/result.txt", "one")
    workspace.record_phase("survey", "inputs-1", ["out"], started=0.0)
    assert workspace.phase_is_current("survey", "inputs-1")
    assert not workspace.phase_is_current("survey", "inputs-2")  # inputs changed
    workspace.path("out/result.txt").write_text("two")  # an output was modified
    assert not workspace.phase_is_current("survey", "inputs-1")
    workspace.path("out/result.txt").unlink()  # or deleted
    assert not workspace.phase_is_current("survey", "inputs-1")


def test_the_cost_ledger_prices_cpu_and_sums_by_phase_and_episode(workspace):
    ledger = CostLedger(workspace.root)
    ledger.add_cpu("rollout", 100.0, episode=0)
    ledger.add_cpu("rollout", 50.0, episode=1)
    ledger.add_gpu("render", 10.0, episode=0)
    assert ledger.by_phase()["rollout"]["total"] == pytest.approx(150 * ledger.prices.cpu_second)
    assert ledger.by_episode()[0] == pytest.approx(100 * ledger.prices.cpu_second + 10 * ledger.prices.gpu_second)
    with ledger.measure_cpu("survey"):
        started = time.process_time()
        while time.process_time() - started < 0.05:  # burn a known amount of CPU
            sum(i * i for i in range(10_000))
    assert ledger.by_phase()["survey"]["cpu"] == pytest.approx(0.05 * ledger.prices.cpu_second, rel=0.5)


def test_a_block_beside_others_in_the_process_is_charged_its_own_thread_only(workspace):
    """A rollout's block runs in a task runner's thread while the flow's thread renders: each is charged
    its own CPU, and a sandboxed worker's reported CPU goes to the thread that made the request."""
    import threading
    import time

    from datafarm.costs import charge_worker_cpu

    ledger = CostLedger(workspace.root)
    running = threading.Event()

    def beside():
        with ledger.measure_cpu("rollout", thread_only=True):
            charge_worker_cpu(5.0)
            running.set()
            time.sleep(0.6)  # waiting on the sandbox costs this thread nothing

    thread = threading.Thread(target=beside)
    thread.start()
    running.wait()
    with ledger.measure_cpu("render"):
        deadline = time.process_time() + 0.5
        while time.process_time() < deadline:
            pass
    thread.join()
    charged = {e.phase: e.quantity for e in ledger.entries()}
    assert 5.0 <= charged["rollout"] < 5.2  # the worker's report, not the render's CPU
    assert 0.45 < charged["render"] < 1.0  # its own loop; the other thread's worker report is not in it


def test_written_files_are_readable_by_others(workspace):
    path = workspace.write_text("reports/x.json", "{}")
    assert path.stat().st_mode & 0o044 == 0o044
