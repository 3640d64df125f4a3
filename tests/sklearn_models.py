"""scikit-learn models fitted on small data sets, for the tests that convert them with
skl2onnx (tests/e2e/test_ml_domains.py, the corpus of tests/corpus)."""
from __future__ import annotations


def sklearn_models() -> dict[str, tuple]:
    """Name -> (fitted model, its float64 inputs, the classifier class whose ZipMap to turn
    off, or None)."""
    from sklearn.datasets import load_iris, make_classification, make_regression
    from sklearn.ensemble import (GradientBoostingClassifier, RandomForestClassifier,
                                  RandomForestRegressor)
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    xi, yi = load_iris(return_X_y=True)
    xb, yb = make_classification(200, 6, random_state=0)
    xr, yr = make_regression(200, 5, random_state=0)
    return {
        "scaler+logistic (3 classes)": (make_pipeline(StandardScaler(), LogisticRegression(
            max_iter=500)).fit(xi, yi), xi, LogisticRegression),
        "scaler+logistic (binary)": (make_pipeline(StandardScaler(), LogisticRegression())
                                     .fit(xb, yb), xb, LogisticRegression),
        "random forest regressor": (RandomForestRegressor(n_estimators=10, max_depth=6,
                                                          random_state=0).fit(xr, yr), xr, None),
        "gradient boosting (3 classes)": (GradientBoostingClassifier(
            n_estimators=10, random_state=0).fit(xi, yi), xi, GradientBoostingClassifier),
        "random forest classifier": (RandomForestClassifier(n_estimators=5, random_state=0)
                                     .fit(xb, yb), xb, RandomForestClassifier),
    }
