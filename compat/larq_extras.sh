#!/usr/bin/env bash
# Builds the test-only larq material of tests/keras/: larq 0.13.3's own test
# files, and larq compute engine for the TensorFlow under test. None of it is
# a dependency of the package.
#
#   compat/larq_extras.sh          # build what is missing or out of date
#
#   compat/.reference/larq-tests/       larq/*_test.py, conftest.py and testing_utils.py
#                                       from larq 0.13.3's wheel (compat/reference-larq.txt),
#                                       downloaded with --no-deps and unpacked, not installed
#   compat/.reference/lce-pyX.Y-tfA.B/  larq-compute-engine (compat/reference-lce.txt),
#                                       installed with --no-deps into a folder that the tests
#                                       add to the path of that TensorFlow python
#
# Environment: PYTHON, the TensorFlow python under test (default python3);
# GRAPH_OVERRIDE_REFERENCE_DIR moves compat/.reference. Each part is rebuilt
# when its requirements file changed (a stamp holds its checksum), under a
# lock. Prints `larq_tests=PATH` and `lce_path=PATH` last. Exit status: 0, or
# 2 when a download or install failed (its output says why).
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
DIR="${GRAPH_OVERRIDE_REFERENCE_DIR:-$ROOT/compat/.reference}"
fail() { echo "compat/larq_extras.sh: $1" >&2; exit 2; }
TAG="$("$PY" -c 'import sys, tensorflow as tf; print("py%d.%d-tf%s" % (sys.version_info[:2] + (".".join(tf.__version__.split(".")[:2]),)))' 2>/dev/null)" \
  || fail "PYTHON=$PY does not import tensorflow; set PYTHON to the TensorFlow python under test"
TESTS="$DIR/larq-tests"
LCE="$DIR/lce-$TAG"
mkdir -p "$DIR" || fail "cannot create $DIR"

exec 9> "$DIR/.larq-lock"
flock 9

up_to_date() {
  [[ -f "$1/.stamp" && "$(cat "$1/.stamp")" == "$(sha256sum < "$2")" ]]
}
stamp() { sha256sum < "$2" > "$1/.stamp.tmp" && mv "$1/.stamp.tmp" "$1/.stamp"; }
quiet() { "$@" 2> >(grep -v "is neither a file nor a directory" >&2); }

REQ="$ROOT/compat/reference-larq.txt"
if ! up_to_date "$TESTS" "$REQ"; then
  echo "compat/larq_extras.sh: unpacking larq's test files into ${TESTS#$ROOT/}" >&2
  rm -rf "$TESTS" "$TESTS.tmp"
  mkdir -p "$TESTS.tmp/wheel"
  quiet "$PY" -m pip download -q --no-deps -d "$TESTS.tmp/wheel" -r "$REQ" \
    || fail "downloading compat/reference-larq.txt failed"
  "$PY" - "$TESTS.tmp" <<'PYEOF' || fail "unpacking larq's wheel failed"
import glob, os, sys, zipfile
out = sys.argv[1]
wheel, = glob.glob(os.path.join(out, "wheel", "larq-*.whl"))
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith("larq/") and n.count("/") == 1
             and (n.endswith("_test.py") or n in ("larq/conftest.py", "larq/testing_utils.py"))]
    z.extractall(out, names)
print("%d files" % len(names), file=sys.stderr)
PYEOF
  rm -rf "$TESTS.tmp/wheel"
  mv "$TESTS.tmp" "$TESTS"
  stamp "$TESTS" "$REQ"
fi

REQ="$ROOT/compat/reference-lce.txt"
if ! up_to_date "$LCE" "$REQ"; then
  echo "compat/larq_extras.sh: installing larq compute engine into ${LCE#$ROOT/}" >&2
  rm -rf "$LCE"
  quiet "$PY" -m pip install -q --no-deps --target "$LCE" -r "$REQ" \
    || fail "installing compat/reference-lce.txt into $LCE failed"
  stamp "$LCE" "$REQ"
fi

echo "larq_tests=$TESTS/larq"
echo "lce_path=$LCE"
