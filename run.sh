#!/usr/bin/env bash
# One entry point for a fresh clone: sets up .venv (the right CuPy wheel for this machine), then runs
#   bash run.sh tour   - the main job: every ladder on this GPU (or compile-only + replay without one)
#   bash run.sh test   - the test suite (GPU tests skip with a reason where there is no GPU)
# Anything after the first word is passed on (e.g. `bash run.sh tour --quick`, `bash run.sh test -k copy`).
set -euo pipefail
cd "$(dirname "$0")"
what="${1:-tour}"; shift || true
PY="${PYTHON:-python3}"
VENV="${LAB_VENV:-.venv}"

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# Which CuPy + NVRTC wheels suit this machine's driver (cupy-cuda12x or -13x); see lab/setup_env.py.
read -r -a wheels <<<"$("$VENV/bin/python" lab/setup_env.py)"
extras="inspect"
[ "$what" = "test" ] && extras="inspect,test"
echo "setting up $VENV: ${wheels[*]} and cupy-kernel-lab[$extras] (log: $VENV/setup.log)" >&2
if ! { "$VENV/bin/python" -m pip install -q --upgrade pip &&
       "$VENV/bin/python" -m pip install -q "${wheels[@]}" -e ".[${extras}]"; } >"$VENV/setup.log" 2>&1; then
  tail -30 "$VENV/setup.log" >&2
  echo "set-up failed: see $VENV/setup.log (pip needs to reach PyPI)" >&2
  exit 1
fi

case "$what" in
  tour) exec "$VENV/bin/lab" tour "$@" ;;
  test)
    if [ ! -d tests ]; then
      echo "This copy has no tests/ (a student bundle?): use 'bash run.sh tour' or '.venv/bin/lab check NN'." >&2
      exit 2
    fi
    "$VENV/bin/ruff" check lab tests
    exec "$VENV/bin/python" -m pytest "$@" ;;
  *) echo "usage: bash run.sh tour|test [args...]" >&2; exit 2 ;;
esac
