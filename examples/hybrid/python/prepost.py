"""Pre- and post-processing of the hybrid inference service.

The same code runs embedded in the JVM through Jep (HybridService, mode
embedded) and in the sidecar process (sidecar.py). Each request does some
numpy work, during which numpy releases the GIL, and a pure-Python loop,
which holds it: with several request threads behind one GIL, threads wait
for it, which is what the pythongil receiver sees.
"""

import numpy as np

_WEIGHTS = np.random.default_rng(0).standard_normal((192, 192))


def _hold_the_gil(seed, n=20000):
    acc = seed
    for i in range(n):
        acc = (acc * 31 + i) % 1000003
    return acc


def preprocess(features, seed):
    """Fill features (rows x 5, float32) in place for request seed."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((192, 192))
    for _ in range(6):
        x = np.tanh(x @ _WEIGHTS)  # BLAS: runs without the GIL
    acc = _hold_the_gil(seed)
    rows = features.shape[0]
    scores = np.abs(x[:rows, :4]).astype(np.float32)
    features[:, 0] = 10.0 + (acc % 7)
    features[:, 1:] = scores
    return acc


def postprocess(explained, seed):
    """Turn the model's explained fraction into a checksum."""
    return _hold_the_gil(int(explained * 1000) + seed, n=10000)
