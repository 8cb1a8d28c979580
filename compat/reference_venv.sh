#!/usr/bin/env bash
# Builds the reference implementations that tests/attribution/reference/
# compares graph_override.attribution with. Test-only: none of it is a
# dependency of the package.
#
#   compat/reference_venv.sh          # build what is missing or out of date
#
#   compat/.reference/captum/         a venv: PyTorch (CPU), Captum, Quantus and Zennit
#                                     (compat/reference-captum.txt, reference-zennit.txt); no TensorFlow
#   compat/.reference/innvestigate/  a venv: iNNvestigate 2.1.2 with the TensorFlow it
#                                     accepts (2.14; compat/reference-innvestigate.txt)
#   compat/.reference/pair-pyX.Y/     PAIR's `saliency` package and the part of
#                                     scikit-image its package imports
#                                     (compat/reference-pair.txt), installed with
#                                     --no-deps into a folder that the tests add
#                                     to the path of a TensorFlow python, so it
#                                     runs on the TensorFlow under test (2.21 or 2.15)
#   compat/.reference/shap-pyX.Y/     SHAP and what its import needs beyond the TensorFlow
#                                     venvs' own packages (compat/reference-shap.txt), the
#                                     same way
#
# Environment: PYTHON, the interpreter (default python3; the CPU torch wheel
# is cp311, so Python 3.11); GRAPH_OVERRIDE_REFERENCE_DIR moves compat/.reference.
# Each part is rebuilt when its requirements file changed (a stamp holds
# its checksum), under a lock, so parallel test runs build it once.
# Prints `captum_python=PATH`, `innvestigate_python=PATH`, `pair_path=PATH` and `shap_path=PATH` last. Exit status: 0, or 2
# when an install failed (its output says why).
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
DIR="${GRAPH_OVERRIDE_REFERENCE_DIR:-$ROOT/compat/.reference}"
fail() { echo "compat/reference_venv.sh: $1" >&2; exit 2; }
PYVER="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
  || fail "PYTHON=$PY does not run; set PYTHON to a Python 3.11 interpreter"
CAPTUM="$DIR/captum"
PAIR="$DIR/pair-py$PYVER"
SHAP="$DIR/shap-py$PYVER"
mkdir -p "$DIR" || fail "cannot create $DIR"

# Holds the lock until the script ends: a second run waits, then finds the stamps.
exec 9> "$DIR/.lock"
flock 9

# up_to_date PART REQUIREMENTS: the part's stamp holds the requirements' checksum.
up_to_date() {
  [[ -f "$1/.stamp" && "$(cat "$1/.stamp")" == "$(sha256sum < "$2")" ]]
}
stamp() { sha256sum < "$2" > "$1/.stamp.tmp" && mv "$1/.stamp.tmp" "$1/.stamp"; }
# pip's notes about this machine's absent local index folders are noise.
quiet() { "$@" 2> >(grep -v "is neither a file nor a directory" >&2); }

# The captum venv's stamp covers its requirements, zennit's, and this block.
REQ="$DIR/.captum-requirements"
cat "$ROOT/compat/reference-captum.txt" "$ROOT/compat/reference-zennit.txt" > "$REQ.tmp"
echo "torchvision-stub-1" >> "$REQ.tmp"
mv "$REQ.tmp" "$REQ"
if ! up_to_date "$CAPTUM" "$REQ"; then
  echo "compat/reference_venv.sh: installing torch, captum, quantus and zennit into ${CAPTUM#$ROOT/}" >&2
  rm -rf "$CAPTUM"
  "$PY" -m venv "$CAPTUM" || fail "$PY -m venv $CAPTUM failed"
  quiet "$CAPTUM/bin/python" -m pip install -q -r "$ROOT/compat/reference-captum.txt" \
    || fail "installing compat/reference-captum.txt into $CAPTUM failed (torch's CPU wheel is cp311: PYTHON must be a Python 3.11)"
  quiet "$CAPTUM/bin/python" -m pip install -q --no-deps -r "$ROOT/compat/reference-zennit.txt" \
    || fail "installing compat/reference-zennit.txt into $CAPTUM failed"
  # zennit/__init__ imports zennit.torchvision, which imports two block classes
  # of torchvision's ResNet for its ResNet canonizer (not used by the tests).
  # Those names, and nothing else, stand in for torchvision.
  SITE="$("$CAPTUM/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  mkdir -p "$SITE/torchvision/models"
  echo '"""Stand-in: only the names zennit.torchvision imports (compat/reference_venv.sh)."""' \
    > "$SITE/torchvision/__init__.py"
  : > "$SITE/torchvision/models/__init__.py"
  printf 'class Bottleneck:\n    pass\n\n\nclass BasicBlock:\n    pass\n' > "$SITE/torchvision/models/resnet.py"
  "$CAPTUM/bin/python" -c "import captum, quantus, zennit.composites" \
    || fail "captum, quantus or zennit does not import in $CAPTUM"
  stamp "$CAPTUM" "$REQ"
fi

REQ="$ROOT/compat/reference-pair.txt"
if ! up_to_date "$PAIR" "$REQ"; then
  echo "compat/reference_venv.sh: installing PAIR's saliency into ${PAIR#$ROOT/}" >&2
  rm -rf "$PAIR"
  quiet "$PY" -m pip install -q --no-deps --target "$PAIR" -r "$REQ" \
    || fail "installing compat/reference-pair.txt into $PAIR failed"
  stamp "$PAIR" "$REQ"
fi

INNV="$DIR/innvestigate"
REQ="$ROOT/compat/reference-innvestigate.txt"
if ! up_to_date "$INNV" "$REQ"; then
  echo "compat/reference_venv.sh: installing iNNvestigate and TensorFlow 2.14 into ${INNV#$ROOT/}" >&2
  rm -rf "$INNV"
  "$PY" -m venv "$INNV" || fail "$PY -m venv $INNV failed"
  quiet "$INNV/bin/python" -m pip install -q -r "$REQ" \
    || fail "installing compat/reference-innvestigate.txt into $INNV failed (TensorFlow 2.14 has wheels for Python 3.9-3.11)"
  TF_CPP_MIN_LOG_LEVEL=3 "$INNV/bin/python" -c "import innvestigate" 2>/dev/null \
    || fail "innvestigate does not import in $INNV"
  stamp "$INNV" "$REQ"
fi

REQ="$ROOT/compat/reference-shap.txt"
if ! up_to_date "$SHAP" "$REQ"; then
  echo "compat/reference_venv.sh: installing SHAP into ${SHAP#$ROOT/}" >&2
  rm -rf "$SHAP"
  quiet "$PY" -m pip install -q --no-deps --target "$SHAP" -r "$REQ" \
    || fail "installing compat/reference-shap.txt into $SHAP failed"
  stamp "$SHAP" "$REQ"
fi

echo "captum_python=$CAPTUM/bin/python"
echo "innvestigate_python=$INNV/bin/python"
echo "pair_path=$PAIR"
echo "shap_path=$SHAP"
