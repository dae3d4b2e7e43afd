"""The stack (compose.yaml, docker/, .dockerignore, .env.example) checked without a Docker daemon.

Each check is a function returning the problems it finds: the real files must have none, and a copy
with one thing broken must have exactly that one (the negative controls). Where Docker's compose
plugin is installed, `docker compose config` validates the file too.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SECRETS = ("POSTGRES_PASSWORD", "PREFECT_API_AUTH_STRING", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
SECRET_NAME = re.compile(r"PASSWORD|SECRET|AUTH_STRING|ACCESS_KEY|API_KEY|TOKEN")
REFERENCE = re.compile(r"\$\{(\w+)(?::?[-?][^}]*)?\}")


def load_compose() -> dict:
    return yaml.safe_load((REPO / "compose.yaml").read_text())


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def one_shot(service: dict) -> bool:
    return service.get("restart") == "no"


# ----- the checks ----------------------------------------------------------------------------------
def image_problems(compose: dict, repo: Path = REPO) -> list[str]:
    problems = []
    for name, service in compose["services"].items():
        build, image = service.get("build"), service.get("image")
        if not build and not image:
            problems.append(f"{name}: neither image nor build")
        if build:
            context = repo / build.get("context", ".")
            dockerfile = context / build.get("dockerfile", "Dockerfile")
            if not dockerfile.is_file():
                problems.append(f"{name}: {dockerfile.relative_to(repo)} does not exist")
        elif image and (":" not in image or image.endswith(":latest")):
            problems.append(f"{name}: image {image} is not pinned to a version")
    return problems


def health_problems(compose: dict) -> list[str]:
    """Every long-running service has a health check, and an HTTP check probes the port it serves."""
    problems = []
    for name, service in compose["services"].items():
        check = service.get("healthcheck")
        if not check or not check.get("test"):
            if not one_shot(service):
                problems.append(f"{name}: no health check")
            continue
        command = " ".join(map(str, service.get("command") or []))
        urls = re.findall(r"http://127\.0\.0\.1:(\d+)/", " ".join(map(str, check["test"])))
        for port in urls:
            serves = re.search(r"--port[ =](\d+)", command)
            worker = "worker start" in command
            if worker and (port != "8080" or "--with-healthcheck" not in command):
                problems.append(f"{name}: a worker's health check is its --with-healthcheck server on 8080")
            elif not worker and (serves is None or serves.group(1) != port):
                problems.append(f"{name}: the health check probes port {port}, the service serves "
                                f"{serves.group(1) if serves else 'no --port'}")
    return problems


def dependency_problems(compose: dict) -> list[str]:
    problems, services = [], compose["services"]
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        for target, rule in (depends.items() if isinstance(depends, dict) else ((d, {}) for d in depends)):
            if target not in services:
                problems.append(f"{name}: depends on {target}, which is no service")
                continue
            condition = (rule or {}).get("condition")
            if condition == "service_healthy" and not services[target].get("healthcheck"):
                problems.append(f"{name}: waits for {target} to be healthy, which has no health check")
            if condition == "service_completed_successfully" and not one_shot(services[target]):
                problems.append(f"{name}: waits for {target} to complete, which is not a one-shot service")
    return problems


def volume_problems(compose: dict) -> list[str]:
    declared = set(compose.get("volumes") or {})
    used, problems = set(), []
    for name, service in compose["services"].items():
        for mount in service.get("volumes") or []:
            source = str(mount).split(":")[0]
            if not source.startswith((".", "/", "$", "~")):
                used.add(source)
                if source not in declared:
                    problems.append(f"{name}: volume {source} is not declared")
    problems += [f"volume {v} is declared but no service mounts it" for v in sorted(declared - used)]
    targets = {name: {str(m).split(":")[1] for m in s.get("volumes") or []} for name, s in compose["services"].items()}
    if "/var/lib/postgresql/data" not in targets.get("postgres", set()):
        problems.append("postgres: the database is not on a volume")
    for name, service in compose["services"].items():
        root = environment(service).get("DATAFARM_FARM_ROOT")
        if root and root not in targets[name]:
            problems.append(f"{name}: its workspaces ({root}) are not on a volume")
    return problems


def secret_problems(compose: dict, env_example: str) -> list[str]:
    """Secrets only as ${NAME} references (required ones with :?), none written in; .env.example lists every
    variable compose reads and gives no secret a value."""
    problems = []
    for name, service in compose["services"].items():
        for key, value in environment(service).items():
            inner = REFERENCE.sub("", value)
            if SECRET_NAME.search(key) and inner.strip():
                problems.append(f"{name}: {key} is written in compose.yaml; take it from the environment (${{{key}}})")
            if key in SECRETS and not re.fullmatch(r"\$\{\w+:\?[^}]*\}", value):
                problems.append(f"{name}: {key} must be required from the environment (${{{key}:?...}})")
            for match in re.finditer(r"://[^:/@\s]+:([^@\s]+)@", value):
                if not REFERENCE.fullmatch(match.group(1)):
                    problems.append(f"{name}: {key} has a password written into its URL")
    text = yaml.safe_dump(compose)
    listed = set(re.findall(r"^#?\s*(\w+)=", env_example, re.MULTILINE))
    for variable in sorted(set(REFERENCE.findall(text)) - listed):
        problems.append(f".env.example does not mention {variable}, which compose.yaml reads")
    for variable, value in re.findall(r"^(\w+)=(.*)$", env_example, re.MULTILINE):
        if SECRET_NAME.search(variable) and value.strip():
            problems.append(f".env.example gives the secret {variable} a value")
    return problems


def worker_problems(compose: dict, prefect_yaml: dict) -> list[str]:
    """Workers are `prefect worker start` on pools prefect.yaml deploys to; nothing runs the serve script."""
    pools = {d["work_pool"]["name"] for d in prefect_yaml["deployments"] if d.get("work_pool")}
    problems, default_workers = [], []
    for name, service in compose["services"].items():
        command = [str(part) for part in service.get("command") or []]
        if any("serve.py" in part for part in command):
            problems.append(f"{name}: runs the serve script instead of a work-pool worker")
        if command[:3] == ["prefect", "worker", "start"]:
            pool = command[command.index("--pool") + 1] if "--pool" in command else None
            if pool not in pools:
                problems.append(f"{name}: works pool {pool}, which no deployment of prefect.yaml uses ({sorted(pools)})")
            if not service.get("profiles"):
                default_workers.append(name)
    if not default_workers:
        problems.append("no CPU work-pool worker runs by default")
    return problems


def dockerignore_rules(text: str) -> list[tuple[bool, re.Pattern]]:
    """(excludes, pattern) for each line, Docker's way: `*` and `?` within a segment, `**` across them, `!`
    re-includes; a pattern excludes a path when it matches the path or one of its parent folders."""
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        include = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        rules.append((not include, re.compile(regex + r"\Z")))
    return rules


def ignored(path: str, rules: list[tuple[bool, re.Pattern]]) -> bool:
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    excluded = False
    for excludes, pattern in rules:
        if any(pattern.match(prefix) for prefix in prefixes):
            excluded = excludes
    return excluded


KEPT_OUT = [".venv/bin/python", "out/demo/ws/workspace.json", "ws/workspace.json", "workspaces/a/manifest.json",
            "tmp/run/ws/workspace.json", ".pytest_cache/v/cache", "datafarm/__pycache__/errors.cpython-312.pyc",
            ".cache/datafarm/s3/bucket/info.json", ".env", ".env.production", "models/wan-vace/model.safetensors",
            ".git/HEAD", "datafarm.egg-info/PKG-INFO"]
KEPT_IN = ["pyproject.toml", "scripts/setup.sh", "datafarm/errors.py", "docker/Dockerfile", "docker/Dockerfile.gpu",
           "deployments/prefect.yaml", "deployments/deploy.py", "plugins/lerobot_env_datafarm/pyproject.toml",
           ".env.example", "configs/rig/dual_piper.yaml", "compose.yaml", "flows/farm.py"]


# ----- the tests -----------------------------------------------------------------------------------
def test_the_compose_file_parses_and_names_the_stack():
    compose = load_compose()
    assert {"postgres", "prefect-server", "worker", "s3", "render-worker"} <= set(compose["services"])


def test_every_service_has_an_image_or_a_build_that_exists():
    compose = load_compose()
    assert image_problems(compose) == []
    broken = copy.deepcopy(compose)
    broken["services"]["worker"]["build"] = {"context": ".", "dockerfile": "docker/Dockerfile.missing"}
    assert image_problems(broken) == ["worker: docker/Dockerfile.missing does not exist"]
    broken["services"]["worker"] = {"image": "postgres:latest"}
    assert image_problems(broken) == ["worker: image postgres:latest is not pinned to a version"]


def test_every_long_running_service_has_a_health_check_on_its_own_port():
    compose = load_compose()
    assert health_problems(compose) == []
    broken = copy.deepcopy(compose)
    del broken["services"]["s3"]["healthcheck"]
    broken["services"]["render-worker"]["command"][-1] = "8701"
    assert health_problems(broken) == ["s3: no health check",
                                       "render-worker: the health check probes port 8700, the service serves 8701"]


def test_dependencies_wait_for_services_that_can_report_it():
    compose = load_compose()
    assert dependency_problems(compose) == []
    broken = copy.deepcopy(compose)
    del broken["services"]["prefect-server"]["healthcheck"]
    assert "worker: waits for prefect-server to be healthy, which has no health check" in dependency_problems(broken)


def test_the_database_and_the_workspaces_are_on_declared_volumes():
    compose = load_compose()
    assert volume_problems(compose) == []
    broken = copy.deepcopy(compose)
    broken["services"]["worker"]["volumes"] = ["scratch:/data/cache"]
    assert volume_problems(broken) == ["worker: volume scratch is not declared",
                                       "worker: its workspaces (/data/farm) are not on a volume"]


def test_secrets_come_from_the_environment_only():
    compose, example = load_compose(), (REPO / ".env.example").read_text()
    assert secret_problems(compose, example) == []
    broken = copy.deepcopy(compose)
    broken["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"] = "hunter2"
    assert secret_problems(broken, example) == [
        "postgres: POSTGRES_PASSWORD is written in compose.yaml; take it from the environment (${POSTGRES_PASSWORD})",
        "postgres: POSTGRES_PASSWORD must be required from the environment (${POSTGRES_PASSWORD:?...})"]
    url = "PREFECT_API_DATABASE_CONNECTION_URL"
    broken = copy.deepcopy(compose)
    broken["services"]["prefect-server"]["environment"][url] = "postgresql+asyncpg://prefect:hunter2@postgres/prefect"
    assert secret_problems(broken, example) == [f"prefect-server: {url} has a password written into its URL"]
    assert secret_problems(compose, example.replace("AWS_SECRET_ACCESS_KEY=\n", "AWS_SECRET_ACCESS_KEY=abc\n")) == [
        ".env.example gives the secret AWS_SECRET_ACCESS_KEY a value"]


def test_workers_are_work_pool_workers_on_the_deployed_pools():
    compose = load_compose()
    prefect_yaml = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
    assert worker_problems(compose, prefect_yaml) == []
    assert "prefect worker start" in " ".join(compose["services"]["worker"]["command"])
    broken = copy.deepcopy(compose)
    broken["services"]["gpu-worker"]["command"][4] = "datafarm-tpu"
    broken["services"]["worker"]["command"] = ["python", "deployments/serve.py"]
    assert worker_problems(broken, prefect_yaml) == [
        "worker: runs the serve script instead of a work-pool worker",
        f"gpu-worker: works pool datafarm-tpu, which no deployment of prefect.yaml uses "
        f"({sorted({d['work_pool']['name'] for d in prefect_yaml['deployments']})})",
        "no CPU work-pool worker runs by default"]


def test_the_gpu_profile_runs_the_render_worker_command_on_the_cuda_image():
    from cli.main import app

    compose = load_compose()
    gpu = {name for name, s in compose["services"].items() if "gpu" in (s.get("profiles") or [])}
    assert gpu == {"render-worker", "gpu-worker"}
    for name in gpu:
        service = compose["services"][name]
        dockerfile = REPO / service["build"]["context"] / service["build"]["dockerfile"]
        assert re.search(r"^FROM nvidia/cuda:\S+", dockerfile.read_text(), re.MULTILINE), dockerfile
        [device] = service["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    command = compose["services"]["render-worker"]["command"]
    assert command[:2] == ["datafarm", "render-worker"]
    registered = {info.name or info.callback.__name__.replace("_", "-") for info in app.registered_commands}
    assert "render-worker" in registered  # the command compose runs is one the CLI has


def test_the_images_run_a_worker_not_the_serve_script():
    for dockerfile in ("docker/Dockerfile", "docker/Dockerfile.gpu"):
        text = (REPO / dockerfile).read_text()
        assert "serve.py" not in text and "scripts/setup.sh" in text
    assert '"prefect", "worker", "start"' in (REPO / "docker/Dockerfile").read_text()


def test_dockerignore_keeps_workspaces_caches_secrets_and_the_venv_out():
    rules = dockerignore_rules((REPO / ".dockerignore").read_text())
    assert [p for p in KEPT_OUT if not ignored(p, rules)] == []
    assert [p for p in KEPT_IN if ignored(p, rules)] == []
    # Negative control: without its .venv line the venv would go into the image.
    text = "\n".join(line for line in (REPO / ".dockerignore").read_text().splitlines() if "venv" not in line)
    assert [p for p in KEPT_OUT if not ignored(p, dockerignore_rules(text))] == [".venv/bin/python"]


def test_every_tracked_file_the_image_needs_is_in_the_build_context():
    rules = dockerignore_rules((REPO / ".dockerignore").read_text())
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    left_out = [path for path in tracked if ignored(path, rules) and not path.startswith(".env")]
    assert left_out == []


def compose_plugin() -> bool:
    docker = shutil.which("docker")
    return bool(docker) and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0


@pytest.mark.skipif(not compose_plugin(), reason="Docker's compose plugin is not installed here")
def test_docker_compose_validates_the_file(tmp_path):
    env = tmp_path / "test.env"
    env.write_text("".join(f"{name}=test-{name.lower()}\n" for name in SECRETS))
    result = subprocess.run(["docker", "compose", "--env-file", str(env), "--profile", "gpu", "config", "--quiet"],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${NAME}, ${NAME:-default} and ${NAME:?message}, for the values these tests run."""
    def one(match: re.Match) -> str:
        name, operator, rest = match.group(1), match.group(2) or "", match.group(3) or ""
        if env.get(name):
            return env[name]
        if operator == ":?":
            raise KeyError(f"{name}: {rest}")
        return rest if operator == ":-" else ""
    return re.sub(r"\$\{(\w+)(:[-?])?([^}]*)\}", one, value)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_the_s3_store_its_health_check_and_the_bucket_step_run_as_written(tmp_path):
    """The s3 service's command, its health check and the s3-bucket one-shot, run here as compose would run
    them (the port moved to a free one); the bucket step is idempotent (a second `up` finds the bucket)."""
    import boto3

    services = load_compose()["services"]
    port = str(free_port())
    command = [port if part == "5000" else "127.0.0.1" if part == "0.0.0.0" else part
               for part in services["s3"]["command"]]
    assert command[:3] == ["python", "-m", "moto.server"]
    server = subprocess.Popen([sys.executable, *command[1:]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        check = [sys.executable if part == "python" else part.replace(":5000/", f":{port}/")
                 for part in services["s3"]["healthcheck"]["test"][1:]]
        deadline = time.monotonic() + 60
        while subprocess.run(check, capture_output=True).returncode != 0:
            assert time.monotonic() < deadline and server.poll() is None, "the s3 service never became healthy"
            time.sleep(0.3)
        values = {name: f"test-{name.lower()}" for name in SECRETS} | {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
        env = {k: interpolate(v, values) for k, v in environment(services["s3-bucket"]).items()}
        bucket_step = [sys.executable, *services["s3-bucket"]["command"][1:]]
        clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        for _ in range(2):
            result = subprocess.run(bucket_step, env={**clean, **env}, capture_output=True, text=True)
            assert result.returncode == 0, result.stderr
        client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                              aws_access_key_id="x", aws_secret_access_key="y")
        assert [b["Name"] for b in client.list_buckets()["Buckets"]] == [env["DATAFARM_BUCKET"]] == ["datafarm"]
        # Negative control: the health check fails once the store is gone.
        server.terminate()
        server.wait(timeout=30)
        assert subprocess.run(check, capture_output=True).returncode != 0
    finally:
        server.kill()


def test_required_secrets_stop_the_interpolation_with_the_fix():
    services = load_compose()["services"]
    with pytest.raises(KeyError, match="POSTGRES_PASSWORD: set POSTGRES_PASSWORD in .env"):
        interpolate(environment(services["postgres"])["POSTGRES_PASSWORD"], {})
    url = environment(services["prefect-server"])["PREFECT_API_DATABASE_CONNECTION_URL"]
    assert interpolate(url, {"POSTGRES_PASSWORD": "s3cret"}) == "postgresql+asyncpg://prefect:s3cret@postgres:5432/prefect"
