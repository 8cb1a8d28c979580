#!/usr/bin/env bash
# Runs graph_override's test suite under one supported TensorFlow release.
#
#   compat/run.sh TF_VERSION [pytest args...]
#   compat/run.sh 2.15                       # the whole suite under TF 2.15
#   compat/run.sh 2.15 tests/test_registry.py -x -q
#
# Creates (once) a virtual environment compat/.venv-TF_VERSION, installs the
# package there with `pip install -c compat/tf-TF_VERSION.txt -e ".[test]"`
# (".[test,reference]" for 2.15: larq, the quantized layers' reference),
# and runs pytest in it from the repository root. The environment is reused
# while compat/tf-TF_VERSION.txt and setup.py are unchanged.
# Environment: PYTHON picks the interpreter that creates the venv (default
# python3). Exit status: pytest's, or 2 for bad usage / a failed install.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
supported() {
  local f
  for f in "$ROOT"/compat/tf-*.txt; do
    f="${f##*/tf-}"
    printf '%s ' "${f%.txt}"
  done
}

if [[ $# -lt 1 || "$1" == "-h" || "$1" == "--help" ]]; then
  echo "usage: compat/run.sh TF_VERSION [pytest args...]" >&2
  echo "supported TF_VERSION: $(supported)" >&2
  exit 2
fi
VERSION="$1"
shift
CONSTRAINTS="$ROOT/compat/tf-$VERSION.txt"
if [[ ! -f "$CONSTRAINTS" ]]; then
  echo "compat/run.sh: no constraints file compat/tf-$VERSION.txt;" \
       "supported releases: $(supported)" >&2
  exit 2
fi

PY="${PYTHON:-python3}"
PYVER="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [[ "$VERSION" == "2.15" && "$PYVER" != 3.9 && "$PYVER" != 3.10 && "$PYVER" != 3.11 ]]; then
  echo "compat/run.sh: TensorFlow 2.15 needs Python 3.9-3.11, $PY is $PYVER;" \
       "set PYTHON=/path/to/python3.11" >&2
  exit 2
fi

VENV="$ROOT/compat/.venv-$VERSION"
# larq 0.13.3, the reference of tests/keras/test_keras_larq.py, runs on Keras 2 only.
EXTRAS="test"
[[ "$VERSION" == "2.15" ]] && EXTRAS="test,reference"
STAMP="$VENV/.graph_override-installed"
WANT="$(cat "$CONSTRAINTS" "$ROOT/setup.py" | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$WANT" ]]; then
  echo "compat/run.sh: installing TensorFlow $VERSION into ${VENV#$ROOT/}" >&2
  [[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
  rm -f "$STAMP"
  # grep drops pip's notes about this machine's absent local index folders.
  if ! (cd "$ROOT" &&
        "$VENV/bin/python" -m pip install -q --upgrade pip &&
        "$VENV/bin/python" -m pip install -q -c "$CONSTRAINTS" -e ".[$EXTRAS]") \
        2> >(grep -v "is neither a file nor a directory" >&2); then
    echo "compat/run.sh: installing into ${VENV#$ROOT/} failed" >&2
    exit 2
  fi
  echo "$WANT" > "$STAMP.tmp" && mv "$STAMP.tmp" "$STAMP"
fi

# Tests known to fail under this release because of their own expectations
# (compat/known-failures-TF_VERSION.txt, one pytest node id a line) are
# deselected, loudly; the file says why for each.
DESELECT=()
KNOWN="$ROOT/compat/known-failures-$VERSION.txt"
if [[ -f "$KNOWN" ]]; then
  while IFS= read -r line; do
    line="${line%%#*}"
    line="${line//[[:space:]]/}"
    [[ -n "$line" ]] && DESELECT+=(--deselect "$line")
  done < "$KNOWN"
  if [[ ${#DESELECT[@]} -gt 0 ]]; then
    echo "compat/run.sh: deselecting $(( ${#DESELECT[@]} / 2 )) known test failure(s)" \
         "listed in compat/known-failures-$VERSION.txt" >&2
  fi
fi

# Tests marked release_independent (pytest.ini) run no TensorFlow or Keras
# code: the newest release runs them (README's test command), the older ones
# need not. The marker expression comes first, so a -m of the caller's wins.
NEWEST="$(supported | tr ' ' '\n' | sort -V | tail -n 1)"
MARK=()
if [[ "$VERSION" != "$NEWEST" ]]; then
  MARK=(-m "not release_independent")
  echo "compat/run.sh: tests marked release_independent run under TensorFlow $NEWEST only" >&2
fi

export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-3}"
# As if activated: subprocesses that run `python` or `graph-override` by
# name get this release's environment, not the machine's.
export VIRTUAL_ENV="$VENV"
export PATH="$VENV/bin:$PATH"
unset PYTHONHOME
cd "$ROOT"
"$VENV/bin/python" -c 'import sys, numpy, tensorflow as tf; print("compat/run.sh: Python %s, TensorFlow %s, numpy %s" % (sys.version.split()[0], tf.__version__, numpy.__version__))'
exec "$VENV/bin/python" -m pytest ${MARK[@]+"${MARK[@]}"} ${DESELECT[@]+"${DESELECT[@]}"} "$@"
