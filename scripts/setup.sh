#!/usr/bin/env bash
# Set up a fresh Debian 12 machine for DataFarm: system packages (as root) and the project venv.
# Idempotent: every step checks first and does nothing when its result is already there.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
STAMP="$VENV/.setup-stamp"

say() { printf '[setup] %s\n' "$*"; }
fail() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

# --- system packages ---------------------------------------------------------------------------
# DATAFARM_SKIP_SYSTEM_PACKAGES=1: an image that installs its own (docker/Dockerfile.gpu: the NVIDIA
# driver's Vulkan instead of Mesa lavapipe) sets up only the venv.
if [ "${DATAFARM_SKIP_SYSTEM_PACKAGES:-0}" != 1 ]; then
mesa_major() {
    dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | sed -E 's/^([0-9]+:)?([0-9]+).*/\2/'
}

need_apt=()
command -v ffmpeg >/dev/null || need_apt+=(ffmpeg)
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
mesa=$(mesa_major || true)
need_mesa=0
if [ -z "$mesa" ] || [ "$mesa" -lt 25 ] || ! dpkg-query -W libvulkan1 >/dev/null 2>&1; then
    need_mesa=1
fi

if [ ${#need_apt[@]} -gt 0 ] || [ "$need_mesa" = 1 ]; then
    if [ "$(id -u)" != 0 ]; then
        fail "missing system packages: ${need_apt[*]} $([ "$need_mesa" = 1 ] && echo 'mesa-vulkan-drivers>=25 libvulkan1'). Run 'sudo make setup' once, or install them yourself (see shared/STACK.md)."
    fi
    export DEBIAN_FRONTEND=noninteractive
    if [ "$need_mesa" = 1 ]; then
        # SAPIEN 3 rejects bookworm's Mesa 22 lavapipe; bookworm-backports has Mesa 25.
        # Derive the backports source from the machine's own Debian stanza (no mirror hard-coded).
        src=/etc/apt/sources.list.d/debian.sources
        dst=/etc/apt/sources.list.d/datafarm-backports.sources
        if [ ! -f "$dst" ]; then
            [ -f "$src" ] || fail "$src not found: add a bookworm-backports apt source by hand, then rerun."
            awk 'BEGIN{RS=""; ORS="\n\n"} /Suites:[^\n]*bookworm( |$|-updates)/ && !/security/ {
                     sub(/Suites:[^\n]*/, "Suites: bookworm-backports"); print; exit }' "$src" >"$dst"
            [ -s "$dst" ] || { rm -f "$dst"; fail "no bookworm stanza in $src to derive backports from."; }
            say "added apt source $dst"
        fi
    fi
    say "apt-get update"
    apt-get update -qq
    if [ ${#need_apt[@]} -gt 0 ]; then
        say "installing ${need_apt[*]}"
        apt-get install -y -qq "${need_apt[@]}" >/dev/null
    fi
    if [ "$need_mesa" = 1 ]; then
        say "installing Mesa lavapipe (Vulkan on the CPU) from bookworm-backports"
        apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers libvulkan1 >/dev/null
    fi
fi
say "system packages ok (ffmpeg, bwrap, Mesa $(mesa_major) lavapipe)"
else
    say "system packages: skipped (DATAFARM_SKIP_SYSTEM_PACKAGES=1)"
fi

# --- python venv -------------------------------------------------------------------------------
find_python() {
    for cand in "${PYTHON:-}" python3.12 python3.13; do
        [ -n "$cand" ] || continue
        if "$cand" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
            command -v "$cand"; return 0
        fi
    done
    # pyenv installs that are not the global version are not on PATH through the shim.
    for cand in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3; do
        [ -x "$cand" ] && { echo "$cand"; return 0; }
    done
    return 1
}

if [ ! -x "$VENV/bin/python" ]; then
    py=$(find_python) || fail "Python >= 3.12 not found. Install python3.12 (or set PYTHON=/path/to/python3.12) and rerun."
    say "creating $VENV with $py"
    "$py" -m venv "$VENV"
fi

if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    say "installing the project and its dependencies into $VENV (first time: a few minutes)"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -e '.[dev]'
    # lerobot finds env plugins by distribution name: this metadata-only one announces lerobot_env_datafarm.
    "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation ./plugins/lerobot_env_datafarm
    # ... and robot plugins the same way: this one announces lerobot_robot_datafarm_piper (--robot.type=datafarm_piper).
    "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation ./plugins/lerobot_robot_datafarm_piper
    touch "$STAMP"
fi
say "venv ok ($("$VENV/bin/python" --version))"
