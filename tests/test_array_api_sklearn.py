"""scikit-learn with array_api_dispatch=True fitting and predicting on lazytensor arrays, against the
same estimators on NumPy arrays (skipped where scikit-learn is not installed). SciPy and scikit-learn
read SCIPY_ARRAY_API when first imported, so each run is a fresh process."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("array_api_compat")

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import sklearn
    from sklearn.decomposition import PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.linear_model import Ridge
    import lazytensor as lt
    import lazytensor.array_api as xp

    if sys.argv[1] == "virtual":
        lt.set_device("virtual", offload="always")  # every kernel that can runs on the device
    rs = np.random.default_rng(0)
    X = rs.standard_normal((300, 8))
    labels = (X[:, 0] + 0.5 * X[:, 1] - X[:, 2] > 0).astype(np.int64) + (X[:, 3] > 1)
    target = X @ rs.standard_normal(8) + 0.1 * rs.standard_normal(300)
    cases = {"PCA": (lambda: PCA(n_components=3, svd_solver="full"), (X,), "transform"),
             "LinearDiscriminantAnalysis": (LinearDiscriminantAnalysis, (X, labels), "predict_proba"),
             "Ridge": (lambda: Ridge(alpha=1.0, solver="svd"), (X, target), "predict")}
    out = {}
    for name, (make, args, method) in cases.items():
        expected = getattr(make().fit(*args), method)(X)
        with sklearn.config_context(array_api_dispatch=True):
            arrays = [xp.asarray(a) for a in args]
            lt.clear_transfer_log()
            fitted = make().fit(*arrays)
            got = getattr(fitted, method)(arrays[0])
            kind = type(got).__module__.split(".")[0]
            values = got.numpy()
        out[name] = {"kind": kind, "max_abs_diff": float(np.abs(values - expected).max()),
                     "scale": float(np.abs(expected).max()),
                     "copies": [[r.direction, r.reason, r.nbytes] for r in lt.transfer_log()]}
    print(json.dumps(out))
""")


def _run(device):
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT, device], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("device", ["cpu", "virtual"])
def test_estimators_fit_and_predict_on_lazytensor_arrays_as_on_numpy(device):
    results = _run(device)
    for name, r in results.items():
        assert r["kind"] == "lazytensor", name  # the result is a lazytensor array, not converted to NumPy
        assert r["max_abs_diff"] <= 1e-9 * max(1.0, r["scale"]), (name, r["max_abs_diff"])
        if device == "virtual":  # the data went up; the factorizations read their operands on the host
            reasons = {reason for _, reason, _ in r["copies"]}
            assert "operand-upload" in reasons and "host-kernel" in reasons, (name, reasons)
