"""The console shows notable events and problems, one line each; the log file gets everything."""

import logging
import os
import subprocess
import sys
import textwrap

import av.logging
import numpy as np
import pytest

from datafarm.logs import NOTABLE, configure_logging, ffmpeg_kept_quiet, silence_ffmpeg
from datafarm.media import write_video


@pytest.fixture
def restore_root():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)


def test_console_shows_notable_and_problems_file_gets_everything(tmp_path, capsys, restore_root):
    log_file = tmp_path / "logs" / "datafarm.log"
    configure_logging(log_file)
    ours = logging.getLogger("datafarm.test")
    ours.debug("debug detail")
    ours.info("routine step")
    ours.info("episode %d kept in %s", 3, "episodes/000003", extra=NOTABLE)
    logging.getLogger("prefect.task_runs").info("Finished in state Completed()")
    logging.getLogger("datafarm.test").warning("two\nlines")
    logging.getLogger("libav.mov").error("moov atom not found")
    err = capsys.readouterr().err
    assert err.splitlines() == ["episode 3 kept in episodes/000003", "warning: two lines"]
    text = log_file.read_text()
    for line in ("debug detail", "routine step", "episode 3 kept", "Finished in state Completed()", "moov atom"):
        assert line in text


def test_verbose_shows_routine_lines(tmp_path, capsys, restore_root):
    configure_logging(None, verbose=True)
    logging.getLogger("datafarm.test").info("routine step")
    assert "routine step" in capsys.readouterr().err


def test_ffmpeg_silenced_after_lerobot_resets_its_callback(tmp_path, capfd):
    frames = [np.zeros((32, 32, 3), np.uint8)] * 5
    av.logging.restore_default_callback()  # what lerobot does after each of its encodes
    write_video(tmp_path / "loud.mp4", frames, 10)
    assert "libx264" in capfd.readouterr().err  # negative control: FFmpeg prints its banner
    av.logging.restore_default_callback()
    silence_ffmpeg()
    write_video(tmp_path / "quiet.mp4", frames, 10)
    assert capfd.readouterr().err == ""


def test_ffmpeg_kept_quiet_while_lerobot_threads_reset_the_callback(tmp_path, capfd):
    """lerobot's encoder threads reset FFmpeg's callback while other encoders still print: inside the
    block the reset itself silences; outside, the reset prints again (the negative control)."""
    frames = [np.zeros((32, 32, 3), np.uint8)] * 5
    with ffmpeg_kept_quiet():
        av.logging.restore_default_callback()
        write_video(tmp_path / "inside.mp4", frames, 10)
    assert capfd.readouterr().err == ""
    av.logging.restore_default_callback()
    write_video(tmp_path / "outside.mp4", frames, 10)
    assert "libx264" in capfd.readouterr().err
    silence_ffmpeg()


@pytest.mark.slow
def test_prefect_state_lines_reach_the_file_not_the_console(tmp_path):
    """In a fresh process, as the command line does: logging first, then Prefect."""
    log_file = tmp_path / "datafarm.log"
    script = textwrap.dedent(f"""
        from pathlib import Path
        from datafarm.logs import configure_logging
        configure_logging(Path({str(log_file)!r}))
        from prefect import flow, task

        @task
        def double(x):
            return 2 * x

        @flow
        def small():
            return double(2)

        assert small() == 4
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                              "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "240", "PREFECT_HOME": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert "Finished in state" not in run.stderr + run.stdout
    assert "Finished in state Completed()" in log_file.read_text()
