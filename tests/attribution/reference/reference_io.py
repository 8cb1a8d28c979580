"""The command line of the reference scripts (captum_maps.py, pair_maps.py).

Each runs in its own interpreter (the torch venv, or the TensorFlow under
test) with only numpy in common, and answers
`SCRIPT REQUEST.npz RESULT.npz [REQUEST.npz RESULT.npz ...]`: several pairs
in one run spare the tests an interpreter's start-up per network.
"""

import sys

import numpy as np


def main(argv, run):
    """Writes run(arrays of REQUEST) to RESULT for each pair; exit status 0, or 2 for bad usage."""
    if len(argv) < 3 or len(argv) % 2 == 0:
        print(f"usage: {argv[0]} REQUEST.npz RESULT.npz [REQUEST.npz RESULT.npz ...]",
              file=sys.stderr)
        return 2
    for request_path, result_path in zip(argv[1::2], argv[2::2]):
        with np.load(request_path) as request:
            result = run(dict(request))
        np.savez(result_path, **result)
    return 0
