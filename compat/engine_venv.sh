#!/usr/bin/env bash
# Installs the scale-out engine (Ray Data, compat/engine-ray.txt) for the
# tests of graph_override.attribution.scale_out. Test-only: the package needs
# it only through its `ray` extra.
#
#   PYTHON=venv/bin/python compat/engine_venv.sh
#
# Installs into compat/.engine/ray-tfX.Y (X.Y: the TensorFlow of PYTHON) with
# --target and PYTHON's own numpy and protobuf as constraints, so the folder,
# appended to that python's path, adds Ray without replacing what TensorFlow
# runs on. GRAPH_OVERRIDE_ENGINE_DIR moves compat/.engine. Rebuilt when the
# requirements changed (a stamp holds their checksum), under a lock. Prints
# `ray_path=PATH` last. Exit status: 0, or 2 when the install failed.
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
DIR="${GRAPH_OVERRIDE_ENGINE_DIR:-$ROOT/compat/.engine}"
fail() { echo "compat/engine_venv.sh: $1" >&2; exit 2; }
TFVER="$("$PY" -c 'import importlib.metadata as m; print(".".join(m.version("tensorflow").split(".")[:2]))')" \
  || fail "PYTHON=$PY has no TensorFlow; set PYTHON to the python under test"
RAY="$DIR/ray-tf$TFVER"
mkdir -p "$DIR" || fail "cannot create $DIR"
exec 9> "$DIR/.lock"
flock 9

PINS="$DIR/.pins-tf$TFVER"
"$PY" -c 'import importlib.metadata as m; print("\n".join("%s==%s" % (n, m.version(n)) for n in ("numpy", "protobuf")))' > "$PINS"
# pyarrow's wheels from 21 on need NumPy 2 at run time (not a declared
# requirement, so pip cannot see it): under NumPy 1 (TensorFlow 2.15) the last
# that loads with it.
if "$PY" -c 'import numpy, sys; sys.exit(int(numpy.__version__.split(".")[0]) >= 2)'; then
  echo "pyarrow<21" >> "$PINS"
fi
SUM="$(cat "$ROOT/compat/engine-ray.txt" "$PINS" | sha256sum)"
if [[ ! -f "$RAY/.stamp" || "$(cat "$RAY/.stamp")" != "$SUM" ]]; then
  echo "compat/engine_venv.sh: installing Ray Data into ${RAY#$ROOT/}" >&2
  rm -rf "$RAY"
  "$PY" -m pip install -q --target "$RAY" -c "$PINS" -r "$ROOT/compat/engine-ray.txt" \
    2> >(grep -v "is neither a file nor a directory" >&2) \
    || fail "installing compat/engine-ray.txt into $RAY failed"
  echo "$SUM" > "$RAY/.stamp"
fi
echo "ray_path=$RAY"
