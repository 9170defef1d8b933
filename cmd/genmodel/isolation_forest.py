"""Train the test IsolationForest on span features and export it with skl2onnx.

The inference processor's tests load the result as a third-party model, made
the way users make theirs. Reproducible: fixed seeds, pinned opsets.

    python3 -m venv /tmp/skl && /tmp/skl/bin/pip install skl2onnx==1.20.0 scikit-learn==1.9.1 onnx==1.23.2
    /tmp/skl/bin/python cmd/genmodel/isolation_forest.py \
        processor/inferenceprocessor/testdata/models/isolation_forest.onnx

Features (float32, one row per span), in the processor's feature order:
  0 duration_ms                  span duration in milliseconds
  1 error                        1 when the span's status is Error, else 0
  2 jvm_safepoint_ms             runtime.overlap.jvm.safepoint.duration in ms
  3 python_gil_wait_ms           runtime.overlap.python.gil.wait.duration in ms
Outputs: label int64[N,1] (1 normal, -1 anomaly), scores float32[N,1]
(IsolationForest.decision_function: below 0 is anomalous).
"""
import sys

import numpy as np
from sklearn.ensemble import IsolationForest
from skl2onnx import to_onnx

rng = np.random.default_rng(7)
n = 4000
duration = rng.lognormal(mean=np.log(20.0), sigma=0.25, size=n)
error = (rng.random(n) < 0.01).astype(np.float64)
safepoint = rng.exponential(0.2, size=n)
gil = rng.exponential(0.3, size=n)
X = np.column_stack([duration, error, safepoint, gil]).astype(np.float32)

model = IsolationForest(n_estimators=25, max_samples=128, contamination=0.01, random_state=7)
model.fit(X)

onx = to_onnx(model, X[:1], target_opset={"": 15, "ai.onnx.ml": 3})
onx.doc_string = "IsolationForest on span features (test model for otelcol-ai's inference processor)"
with open(sys.argv[1], "wb") as f:
    f.write(onx.SerializeToString())

normal = np.array([[20.0, 0, 0.2, 0.3]], dtype=np.float32)
odd = np.array([[400.0, 1, 30.0, 50.0]], dtype=np.float32)
print("normal", model.decision_function(normal), model.predict(normal))
print("odd   ", model.decision_function(odd), model.predict(odd))
