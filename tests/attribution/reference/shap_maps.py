"""SHAP's DeepExplainer maps of a network given as numpy weights.

Runs with the TensorFlow under test (2.21 or 2.15) and SHAP on its path
(compat/reference_venv.sh puts it in compat/.reference/shap-pyX.Y), as

    PYTHONPATH=SHAP_PATH python shap_maps.py REQUEST.npz RESULT.npz [REQUEST RESULT ...]

(reference_io.py). REQUEST is the one captum_maps.py reads (its layers; an
"act" layer may be "softmax" here), with `baseline` holding the background
rows: SHAP's DeepExplainer is DeepLIFT from each background row, averaged
over them. RESULT holds `shap` (each example's map for its target class),
`logits` (the Keras model's outputs) and `expected` (SHAP's expected value
per class, the mean output over the background).
"""

import sys

import numpy as np
import reference_io
import reference_networks as nets
import shap


def run(request):
    """SHAP's maps of one request."""
    import json  # pylint: disable=import-outside-toplevel
    spec = json.loads(str(request["spec"]))
    arrays = {k: v for k, v in request.items() if k[0] in "wb" and k[1:].isdigit()}
    model = nets.keras_model(spec["layers"], arrays)
    x, target = request["x"], request["target"]
    explainer = shap.DeepExplainer(model, request["baseline"])
    values = np.asarray(explainer.shap_values(x, check_additivity=False))
    if values.shape[0] != x.shape[0]:  # older SHAP: a list, one array per class
        values = np.moveaxis(values, 0, -1)
    maps = np.stack([values[i, ..., k] for i, k in enumerate(target)])
    return {"shap": maps, "logits": np.asarray(model(x)),
            "expected": np.asarray(explainer.expected_value, np.float64)}


if __name__ == "__main__":
    sys.exit(reference_io.main(sys.argv, run))
