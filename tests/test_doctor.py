from datafarm.doctor import check_command, check_package, check_writable, run_checks


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
