#!/usr/bin/env bash
# One entry point for a fresh clone or a student bundle: sets up .venv (the right CuPy wheel for this
# machine), then runs
#   bash run.sh setup      - only the set-up (then use .venv/bin/lab ...)
#   bash run.sh tour       - the main job: every ladder on this GPU (or compile-only + replay without one)
#   bash run.sh test       - the test suite (GPU tests skip with a reason where there is no GPU); in a
#                            student bundle, which has no tests/, the same as `check`
#   bash run.sh check [NN] - `lab check` on exercise NN, or on every exercise that has a kernel.cu
#   bash run.sh notebooks  - JupyterLab on notebooks/ (installed into .venv on first use)
# Anything after the first word is passed on (e.g. `bash run.sh tour --quick`, `bash run.sh test -k copy`).
# LAB_OFFLINE=1 uses .venv as it is and installs nothing (a machine without PyPI, set up before).
set -euo pipefail
cd "$(dirname "$0")"
what="${1:-tour}"; shift || true
PY="${PYTHON:-python3}"
VENV="${LAB_VENV:-.venv}"

case "$what" in
  setup|tour|check) extras="inspect" ;;
  test) extras="inspect"; [ -d tests ] && extras="inspect,test" ;;
  notebooks) extras="inspect,notebooks" ;;
  *) echo "usage: bash run.sh setup|tour|test|check|notebooks [args...]" >&2; exit 2 ;;
esac

if [ "${LAB_OFFLINE:-0}" != 1 ]; then
  if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
  fi
  # Which CuPy + NVRTC wheels suit this machine's driver (cupy-cuda12x or -13x); see lab/core/setup_env.py.
  read -r -a wheels <<<"$("$VENV/bin/python" lab/core/setup_env.py)"
  # What the set-up installs from: the wheels, the extras and pyproject.toml. When they are what .venv was last set
  # up from, pip is not run again (it takes seconds even when there is nothing to do).
  stamp="$VENV/.lab-setup"
  want="$(printf '%s\n' "${wheels[*]}" "$extras" | cat - pyproject.toml | cksum)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setting up $VENV: ${wheels[*]} and cupy-kernel-lab[$extras] (log: $VENV/setup.log)" >&2
    if ! { "$VENV/bin/python" -m pip install -q --upgrade pip &&
           "$VENV/bin/python" -m pip install -q "${wheels[@]}" -e ".[${extras}]"; } >"$VENV/setup.log" 2>&1; then
      tail -30 "$VENV/setup.log" >&2
      echo "set-up failed: see $VENV/setup.log (pip needs to reach PyPI)" >&2
      exit 1
    fi
    echo "$want" >"$stamp"
  fi
elif [ ! -x "$VENV/bin/lab" ]; then
  echo "LAB_OFFLINE=1 but $VENV has no lab installed: run 'bash run.sh setup' once with PyPI reachable." >&2
  exit 1
fi

# `lab check` on every started exercise (a kernel.cu in its folder) and on the dispatch-table exercise (its rules.json
# is the student's file from the start): 0 when every one passed its visible checks, 3 when none could be graded (no
# GPU), 1 otherwise; a note when no kernel exercise is started yet.
check_all() {
  local kernels=0 checked=0 failed=0 graded=0 folder status
  for folder in exercises/[0-9][0-9]_*/; do
    if [ -f "${folder}kernel.cu" ]; then
      kernels=$((kernels + 1))
    elif ! grep -q '"kind": *"dispatch_rules"' "${folder}exercise.json" 2>/dev/null; then
      continue
    fi
    checked=$((checked + 1))
    status=0
    "$VENV/bin/lab" check "$(basename "$folder")" || status=$?
    [ "$status" = 3 ] || graded=$((graded + 1))
    [ "$status" = 0 ] || [ "$status" = 3 ] || failed=$((failed + 1))
  done
  if [ "$kernels" = 0 ]; then
    echo "No kernel exercise is started yet: copy exercises/NN_*/starter.cu to kernel.cu in the same folder, fill in its TODOs, then run 'bash run.sh check' again." >&2
  fi
  [ "$checked" -gt 0 ] || return 2
  [ "$failed" = 0 ] || return 1
  [ "$graded" -gt 0 ] || return 3
}

case "$what" in
  setup) echo "set up: now run '$VENV/bin/lab check 01' (see README.md)" >&2 ;;
  tour) exec "$VENV/bin/lab" tour "$@" ;;
  check)
    if [ $# -gt 0 ]; then exec "$VENV/bin/lab" check "$@"; fi
    check_all ;;
  test)
    if [ ! -d tests ]; then
      echo "This is a student bundle (no tests/): 'test' runs 'lab check' on every exercise you have started." >&2
      check_all
      exit $?
    fi
    "$VENV/bin/ruff" check lab tests
    exec "$VENV/bin/python" -m pytest "$@" ;;
  notebooks) exec "$VENV/bin/jupyter" lab notebooks/ "$@" ;;
esac
