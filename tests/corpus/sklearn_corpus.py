"""scikit-learn models of the corpus, converted by skl2onnx (ZipMap off, opset 17 and
ai.onnx.ml 3): the ones tests/e2e/test_ml_domains.py converts (``sklearn_models``) and a
few pipelines more.  The batch axis is dynamic."""
from __future__ import annotations

import functools
import re
import warnings

import numpy as np

from corpus.entry import Dims, Entry, Family
from sklearn_models import sklearn_models

ML = "ai.onnx.ml"
AXES = {"X": {0: "batch"}}
#: Models whose nodes may run on the fallback kernel, and why.
FALLBACK: dict[str, str] = {}
SHAPES = ({"batch": 1}, {"batch": 17})
STATIC = {"batch": 8}


def more_models() -> dict[str, tuple]:
    """Pipelines the e2e tests do not convert: PCA into an SVM, min-max scaling into an MLP,
    a nearest-neighbours regressor.  (skl2onnx 1.20 cannot convert scikit-learn 1.9's
    HistGradientBoostingRegressor: its TreeEnsembleRegressor node fails onnx's checks.)"""
    from sklearn.datasets import load_iris, make_regression
    from sklearn.decomposition import PCA
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler, StandardScaler
    from sklearn.svm import SVC

    xi, yi = load_iris(return_X_y=True)
    xr, yr = make_regression(200, 5, random_state=0)
    return {
        "scaler+pca+svc (3 classes)": (make_pipeline(StandardScaler(), PCA(3), SVC()).fit(xi, yi),
                                       xi, SVC),
        "minmax+mlp (3 classes)": (make_pipeline(MinMaxScaler(), MLPClassifier(
            (16,), max_iter=300, random_state=0)).fit(xi, yi), xi, MLPClassifier),
        "scaler+nearest neighbours regressor": (make_pipeline(StandardScaler(), KNeighborsRegressor(3))
                                                .fit(xr, yr), xr, None),
    }


@functools.lru_cache(maxsize=None)
def fitted() -> dict[str, tuple]:
    """Every model by its corpus name, fitted once per process."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the MLP's ConvergenceWarning
        models = {**sklearn_models(), **more_models()}
    return {"skl-" + re.sub(r"[^a-z0-9]+", "-", k).strip("-"): v for k, v in models.items()}


def _feeds(name: str):
    def feeds(dims: Dims, seed: int) -> dict[str, np.ndarray]:
        """``batch`` rows of the model's data, from a row that depends on the seed."""
        x = fitted()[name][1].astype(np.float32)
        start = (seed * 7) % (len(x) - dims["batch"])
        return {"X": x[start:start + dims["batch"]]}

    return feeds


def _build(name: str):
    def build(path: str) -> None:
        import onnx
        from skl2onnx import to_onnx

        model, x, classifier = fitted()[name]
        options = {classifier: {"zipmap": False}} if classifier else None
        onx = to_onnx(model, x[:1].astype(np.float32), options=options,
                      target_opset={"": 17, ML: 3})
        onnx.save(onx, path)

    return build


def describe(model) -> str:
    """``Pipeline (StandardScaler -> SVC)``, or the estimator's class."""
    steps = getattr(model, "steps", None)
    inner = f" ({' -> '.join(type(s).__name__ for _, s in steps)})" if steps else ""
    return f"skl2onnx: {type(model).__name__}{inner}"


def sklearn_entries() -> list[Entry]:
    return [Entry(name, Family.SKL2ONNX, _build(name), _feeds(name), AXES, SHAPES, STATIC,
                  describe(model), dict(model=repr(model)), fallback=FALLBACK.get(name, ""))
            for name, (model, _, _) in fitted().items()]
