from datafarm.doctor import (
    check_can_interfaces,
    check_command,
    check_package,
    check_robot_plugin,
    check_writable,
    run_checks,
)


def test_doctor_passes_on_a_set_up_machine(tmp_path):
    failed = [c for c in run_checks(tmp_path) if not c.ok and not c.optional]
    assert not failed, failed


def test_missing_things_come_with_a_fix(tmp_path):
    command = check_command("no-such-command-xyz", "no-such-package")
    assert not command.ok and "apt-get install no-such-package" in command.fix
    package = check_package("no-such-distribution-xyz", "1.")
    assert not package.ok and "make setup" in package.fix
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert not check_writable(blocker / "sub").ok


def test_the_piper_robot_plugin_is_registered_with_lerobot():
    assert check_robot_plugin().ok
    missing = check_robot_plugin(distribution="lerobot_robot_no_such_xyz")
    assert not missing.ok and "not installed" in missing.detail and "make setup" in missing.fix
    unknown = check_robot_plugin(robot_type="no_such_robot_xyz")
    assert not unknown.ok and unknown.detail == "not registered"


def test_can_interfaces_are_listed_and_never_a_failure(tmp_path):
    """A sysfs-like tree: interfaces of type 280 (CAN) are listed with their state; none is only informational."""
    for name, kind, state in (("can0", "280", "up"), ("can1", "280", "down"), ("eth0", "1", "up")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "type").write_text(kind + "\n")
        (tmp_path / name / "operstate").write_text(state + "\n")
    found = check_can_interfaces(tmp_path)
    assert found.optional and found.detail == "can0 (up), can1 (down)" and "can1" in found.fix and not found.ok
    (tmp_path / "can1" / "operstate").write_text("up\n")
    assert check_can_interfaces(tmp_path).ok
    none = check_can_interfaces(tmp_path / "eth0")
    assert none.optional and not none.ok and none.detail == "none" and "docs/real-robot.md" in none.fix
