#!/usr/bin/env bash
# Builds larq-zoo for TensorFlow 2.15's python, the reference that
# tests/keras/test_keras_zoo*.py compare graph_override.keras.zoo with.
# Test-only: none of it is a dependency of the package.
#
#   PYTHON=compat/.venv-2.15/bin/python compat/reference_zoo.sh
#
#   compat/.reference/zoo-pyX.Y/   larq-zoo and the pure-python packages its
#                                  model modules import (compat/reference-zoo.txt),
#                                  installed with --no-deps into a folder that the
#                                  tests add to the path of the python that has
#                                  larq (TensorFlow 2.15): larq-zoo's own
#                                  requirements would replace its protobuf and larq
#
# larq-zoo's package imports tensorflow_datasets (for its training code);
# a stand-in with the two names it and zookeeper read on import takes its
# place. Environment: PYTHON, the interpreter that has TensorFlow 2.15 and
# larq; GRAPH_OVERRIDE_REFERENCE_DIR moves compat/.reference. Rebuilt when
# the requirements change (a stamp holds their checksum), under a lock.
# Prints `zoo_path=PATH` last. Exit status: 0, or 2 when the install failed.
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
DIR="${GRAPH_OVERRIDE_REFERENCE_DIR:-$ROOT/compat/.reference}"
fail() { echo "compat/reference_zoo.sh: $1" >&2; exit 2; }
PYVER="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
  || fail "PYTHON=$PY does not run; set PYTHON to TensorFlow 2.15's python"
ZOO="$DIR/zoo-py$PYVER"
REQ="$ROOT/compat/reference-zoo.txt"
mkdir -p "$DIR" || fail "cannot create $DIR"

exec 9> "$DIR/.lock-zoo"
flock 9

STAMP="$( (cat "$REQ"; echo "tensorflow-datasets-stand-in-1") | sha256sum)"
if [[ ! -f "$ZOO/.stamp" || "$(cat "$ZOO/.stamp")" != "$STAMP" ]]; then
  echo "compat/reference_zoo.sh: installing larq-zoo into ${ZOO#$ROOT/}" >&2
  rm -rf "$ZOO"
  "$PY" -m pip install -q --no-deps --target "$ZOO" -r "$REQ" \
      2> >(grep -v "is neither a file nor a directory" >&2) \
    || fail "installing compat/reference-zoo.txt into $ZOO failed"
  rm -rf "$ZOO/tests" "$ZOO/bin"  # larq-zoo's wheel ships its tests as a top-level package
  mkdir -p "$ZOO/tensorflow_datasets"
  cat > "$ZOO/tensorflow_datasets/__init__.py" <<'PY'
"""Stand-in: the names larq_zoo and zookeeper read on import (compat/reference_zoo.sh)."""


class _Decoder:
    pass


class decode:  # noqa: N801 (a module in tensorflow_datasets)
    Decoder = _Decoder
    SkipDecoding = _Decoder
PY
  echo "$STAMP" > "$ZOO/.stamp"
fi
echo "zoo_path=$ZOO"
