"""The sandbox for agent-written code: each check has a positive control where one makes sense."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from datafarm.agent import SandboxError, SandboxLimits, run_python_in_sandbox, run_sandboxed
from datafarm.paths import REPO_ROOT  # an editable install imports datafarm from the checkout



@pytest.fixture(autouse=True)
def _needs_bwrap(request):
    if shutil.which("bwrap") is None and "missing_bwrap" not in request.node.name:
        pytest.skip("bubblewrap is not installed (make setup)")


QUICK = SandboxLimits(wall_seconds=20, memory_bytes=1 << 30)
SECRET = "JUDGE-SECRET-7f3a"


def outside(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """The same code run without the sandbox (positive controls)."""
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=30)


def test_a_normal_script_returns_its_stdout(tmp_path):
    result = run_python_in_sandbox("import sys; print('hello', 6 * 7); print('note', file=sys.stderr)",
                                   tmp_path / "w", limits=QUICK)
    assert result.ok and result.returncode == 0 and result.violation is None
    assert result.stdout == "hello 42\n" and result.stderr == "note\n"
    assert result.wall_seconds < 20


def test_a_shell_command_string_runs_in_the_workdir(tmp_path):
    result = run_sandboxed("pwd; echo $HOME", tmp_path / "w", limits=QUICK)
    assert result.ok and result.stdout.split() == [str(tmp_path / "w")] * 2


def test_tcp_to_the_hosts_loopback_fails_inside(tmp_path):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')"
    try:
        assert outside(code, tmp_path).stdout == "connected\n"  # the server is reachable from the host
        result = run_python_in_sandbox(code, tmp_path / "w", limits=QUICK)
    finally:
        server.close()
    assert "connected" not in result.stdout
    assert result.violation == "error" and "Error" in result.stderr


def test_dns_and_udp_fail_inside(tmp_path):
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(2)
    port = receiver.getsockname()[1]
    send = f"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'ping', ('127.0.0.1', {port}))"
    try:
        assert outside(send, tmp_path).returncode == 0
        assert receiver.recv(16) == b"ping"  # control: a datagram from the host arrives
        run_python_in_sandbox(send, tmp_path / "w", limits=QUICK)
        with pytest.raises(TimeoutError):
            receiver.recv(16)
    finally:
        receiver.close()
    lookup = run_python_in_sandbox("import socket; print(socket.getaddrinfo('pypi.org', 443))", tmp_path / "w",
                                   limits=QUICK)
    assert lookup.violation == "error" and "gaierror" in lookup.stderr


@pytest.mark.parametrize("where", ["file in a readable folder", "folder", "file in the workdir"])
def test_a_hidden_judge_cannot_be_read_inside(tmp_path, where):
    task, workdir = tmp_path / "task", tmp_path / "w"
    if where == "folder":
        judge, hide = task / "judge" / "judge.py", task / "judge"
    elif where == "file in the workdir":
        judge = hide = workdir / "judge.py"
    else:
        judge = hide = task / "judge.py"
    judge.parent.mkdir(parents=True)
    task.mkdir(exist_ok=True)
    judge.write_text(f"SECRET = {SECRET!r}\n")
    (task / "expert.py").write_text("print('expert')\n")
    code = (f"try:\n    print(open({str(judge)!r}).read())\nexcept OSError as exc:\n    print(type(exc).__name__)\n"
            f"print(open({str(task / 'expert.py')!r}).read())")
    assert SECRET in outside(code, tmp_path).stdout  # control: readable without the sandbox
    result = run_python_in_sandbox(code, workdir, readable=[task], hidden=[hide], limits=QUICK)
    assert result.ok, result.stderr
    assert SECRET not in result.stdout
    assert "expert" in result.stdout  # the rest of the package stays readable
    assert judge.read_text() == f"SECRET = {SECRET!r}\n"  # and the judge is untouched


def test_writes_land_only_in_the_workdir(tmp_path):
    source, workdir = tmp_path / "src", tmp_path / "w"
    source.mkdir()
    targets = [source / "x.txt", tmp_path / "beside.txt", Path("/usr/datafarm_probe.txt"), Path.home() / "probe.txt"]
    code = "import sys\nopen('inside.txt', 'w').write('ok')\n"
    for target in targets:
        code += (f"try:\n    open({str(target)!r}, 'w').write('x')\n    print('wrote', {str(target)!r})\n"
                 f"except OSError as exc:\n    print('refused', exc.errno)\n")
    result = run_python_in_sandbox(code, workdir, readable=[source], limits=QUICK)
    assert result.ok, result.stderr
    assert (workdir / "inside.txt").read_text() == "ok"
    leaked = [target for target in targets if target.exists()]
    for target in leaked:  # a broken sandbox must not leave files on the host
        target.unlink()
    assert not leaked
    # beside.txt lands in the sandbox's private /tmp (tmp_path is under /tmp), never on the host
    assert result.stdout.count("refused 30") == 3  # EROFS for the read-only binds and the masked home


def test_an_infinite_loop_stops_at_the_wall_limit_with_everything_it_started(tmp_path):
    workdir = tmp_path / "w"
    late = ("import subprocess, sys\n"
            "child = subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(1.5); open(\"late.txt\", \"w\").write(\"x\")'])\n")
    control = run_python_in_sandbox(late + "child.wait()", workdir, limits=QUICK)
    assert control.ok and (workdir / "late.txt").exists()  # control: the child does write late
    (workdir / "late.txt").unlink()
    started = time.monotonic()
    result = run_python_in_sandbox(late + "while True:\n    pass\n", workdir,
                                   limits=SandboxLimits(wall_seconds=0.7))
    assert result.violation == "timeout" and not result.ok
    assert time.monotonic() - started < 8
    time.sleep(max(0.0, 2.5 - (time.monotonic() - started)))
    assert not (workdir / "late.txt").exists()  # the grandchild died with the sandbox


def test_the_cpu_limit_is_a_timeout(tmp_path):
    started = time.monotonic()
    result = run_python_in_sandbox("while True:\n    pass\n", tmp_path / "w",
                                   limits=SandboxLimits(wall_seconds=30, cpu_seconds=1))
    assert result.violation == "timeout"
    assert time.monotonic() - started < 15


def test_allocating_past_the_memory_limit_is_a_memory_violation(tmp_path):
    code = "b = bytearray(1 << 30); print(len(b))"  # calloc'd: cheap without a limit
    assert run_python_in_sandbox(code, tmp_path / "w", limits=SandboxLimits(memory_bytes=None)).ok  # control
    result = run_python_in_sandbox(code, tmp_path / "w", limits=SandboxLimits(memory_bytes=256 << 20))
    assert result.violation == "memory" and result.stdout == ""


def test_output_is_truncated_keeping_head_and_tail(tmp_path):
    code = "print('START' + 'x' * 200000 + 'END')"
    result = run_python_in_sandbox(code, tmp_path / "w", limits=SandboxLimits(max_output_bytes=1000))
    assert result.ok and result.stdout_truncated and not result.stderr_truncated
    assert result.stdout.startswith("START") and result.stdout.rstrip().endswith("END")
    assert len(result.stdout) < 1100 and "bytes cut" in result.stdout


def test_only_the_given_environment_is_visible(tmp_path, monkeypatch):
    monkeypatch.setenv("DATAFARM_TEST_API_KEY", "sk-should-not-leak")
    code = "import os; print(os.environ.get('DATAFARM_TEST_API_KEY'), os.environ['MINE'], os.environ['HOME'])"
    result = run_python_in_sandbox(code, tmp_path / "w", env={"MINE": "given"}, limits=QUICK)
    assert result.ok and result.stdout.split() == ["None", "given", str(tmp_path / "w")]


def test_a_python_module_runner_writes_into_its_workspace(tmp_path):
    """The shape the expert runner will take: python -m pkg.runner ARGS, workspace bound writable."""
    code, workspace = tmp_path / "code", tmp_path / "workspace"
    (code / "runner_pkg").mkdir(parents=True)
    (code / "runner_pkg" / "__init__.py").write_text("")
    (code / "runner_pkg" / "runner.py").write_text(
        "import json, sys\nimport datafarm\n"
        "open(sys.argv[2], 'w').write(json.dumps({'seed': int(sys.argv[1]), 'lib': datafarm.__version__}))\n")
    result = run_sandboxed([sys.executable, "-m", "runner_pkg.runner", "7", str(workspace / "out.json")],
                           workspace, readable=[code, REPO_ROOT, Path(sys.prefix), Path(sys.base_prefix)],
                           env={"PYTHONPATH": str(code)}, limits=QUICK)
    assert result.ok, result.stderr
    assert '"seed": 7' in (workspace / "out.json").read_text()


@pytest.mark.parametrize("misbehaviour,violation", [
    ("raise RuntimeError('expert crashed')", "error"),
    ("while True:\n    pass", "timeout"),
    ("b = bytearray(1 << 31)", "memory"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "killed"),
])
def test_a_misbehaving_attempt_does_not_stop_the_next(tmp_path, misbehaviour, violation):
    scripts = ["print('first')", misbehaviour, "print('third')"]
    limits = SandboxLimits(wall_seconds=1.5, memory_bytes=512 << 20)
    results = [run_python_in_sandbox(code, tmp_path / f"attempt{i}", limits=limits) for i, code in enumerate(scripts)]
    assert [r.violation for r in results] == [None, violation, None]
    assert results[0].stdout == "first\n" and results[2].stdout == "third\n"


def test_a_missing_bwrap_raises_a_clear_error(tmp_path):
    with pytest.raises(SandboxError, match="bubblewrap.*make setup"):
        run_sandboxed(["true"], tmp_path / "w", bwrap=tmp_path / "no-such-bwrap")


def test_a_missing_readable_path_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="readable"):
        run_sandboxed(["true"], tmp_path / "w", readable=[tmp_path / "absent"])
