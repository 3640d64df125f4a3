"""scikit-learn models fitted on small data sets, for the tests that convert them with
skl2onnx (tests/e2e/test_ml_domains.py, the corpus of tests/corpus, and the survey of
common estimators in tests/e2e/test_sklearn_models.py)."""
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


def estimator_survey() -> dict[str, tuple]:
    """Name -> (fitted model, its float64 inputs, the classifier class whose ZipMap to turn
    off, or None): common estimators and transformers of every family skl2onnx converts,
    on small data sets, each model converting to ai.onnx.ml ops aircc runs natively (the
    SVMs, Imputer and OneHotEncoder among them) or to default-domain ops alone."""
    import numpy as np
    from sklearn import (cluster, compose, decomposition, ensemble, impute, linear_model,
                         naive_bayes, neighbors, neural_network, preprocessing, svm, tree)
    from sklearn.datasets import load_iris, make_classification, make_regression
    from sklearn.pipeline import make_pipeline, make_union

    xi, yi = load_iris(return_X_y=True)
    xb, yb = make_classification(60, 6, random_state=0)
    xr, yr = make_regression(60, 5, random_state=0)
    xn = xr.copy()
    xn[::4, 1] = xn[1::5, 3] = np.nan
    xc = np.random.default_rng(0).integers(0, 4, size=(60, 3)).astype(np.float64)
    pp = preprocessing

    def classifier(model, x, y):
        return model.fit(x, y), x, type(model.steps[-1][1] if hasattr(model, "steps") else model)

    return {
        "SVC rbf (3 classes)": classifier(svm.SVC(), xi, yi),
        "SVC probability (3 classes)": classifier(svm.SVC(probability=True, random_state=0), xi, yi),
        "SVC binary": classifier(svm.SVC(), xb, yb),
        "SVC sigmoid probability (binary)": classifier(svm.SVC(kernel="sigmoid", probability=True,
                                                               random_state=0), xb, yb),
        "NuSVC poly (3 classes)": classifier(svm.NuSVC(kernel="poly", degree=2), xi, yi),
        "SVC linear (3 classes)": classifier(svm.SVC(kernel="linear"), xi, yi),
        "LinearSVC (3 classes)": (svm.LinearSVC().fit(xi, yi), xi, None),      # no ZipMap
        "SVR": (svm.SVR().fit(xr, yr), xr, None),
        "NuSVR poly": (svm.NuSVR(kernel="poly").fit(xr, yr), xr, None),
        "LinearSVR": (svm.LinearSVR().fit(xr, yr), xr, None),
        "OneClassSVM": (svm.OneClassSVM().fit(xb), xb, None),
        "scaler+pca+svc (3 classes)": classifier(make_pipeline(
            pp.StandardScaler(), decomposition.PCA(n_components=3), svm.SVC()), xi, yi),
        "imputer+scaler+svr": (make_pipeline(impute.SimpleImputer(), pp.StandardScaler(), svm.SVR())
                               .fit(xn, yr), xn, None),
        "k-neighbours classifier": classifier(neighbors.KNeighborsClassifier(n_neighbors=3), xi, yi),
        "k-neighbours regressor": (neighbors.KNeighborsRegressor(n_neighbors=3).fit(xr, yr), xr, None),
        "gaussian naive Bayes": classifier(naive_bayes.GaussianNB(), xi, yi),
        "multinomial naive Bayes": classifier(naive_bayes.MultinomialNB(), xi, yi),
        "Bernoulli naive Bayes": classifier(naive_bayes.BernoulliNB(), xb, yb),
        "MLP classifier": classifier(neural_network.MLPClassifier(
            hidden_layer_sizes=(8,), max_iter=300, random_state=0), xi, yi),
        "MLP regressor": (neural_network.MLPRegressor(hidden_layer_sizes=(8,), max_iter=300, random_state=0)
                          .fit(xr, yr), xr, None),
        "ridge": (linear_model.Ridge().fit(xr, yr), xr, None),
        "lasso": (linear_model.Lasso().fit(xr, yr), xr, None),
        "elastic net": (linear_model.ElasticNet().fit(xr, yr), xr, None),
        "SGD classifier": classifier(linear_model.SGDClassifier(random_state=0), xi, yi),
        "SGD regressor": (linear_model.SGDRegressor(random_state=0).fit(xr, yr), xr, None),
        "decision tree classifier": classifier(tree.DecisionTreeClassifier(max_depth=4), xi, yi),
        "extra trees regressor": (ensemble.ExtraTreesRegressor(n_estimators=5, max_depth=4, random_state=0)
                                  .fit(xr, yr), xr, None),
        "gradient boosting regressor": (ensemble.GradientBoostingRegressor(n_estimators=5)
                                        .fit(xr, yr), xr, None),
        "k-means": (cluster.KMeans(n_clusters=3, n_init=2, random_state=0).fit(xi), xi, None),
        "min-max+max-abs+robust scalers": (make_pipeline(
            pp.MinMaxScaler(), pp.MaxAbsScaler(), pp.RobustScaler()).fit(xr), xr, None),
        "truncated SVD+normalizer": (make_pipeline(decomposition.TruncatedSVD(n_components=3), pp.Normalizer())
                                     .fit(xr), xr, None),
        "polynomial features": (pp.PolynomialFeatures(degree=2).fit(xr), xr, None),
        "simple imputer (median)": (impute.SimpleImputer(strategy="median").fit(xn), xn, None),
        "power transformer": (pp.PowerTransformer().fit(np.abs(xr) + 0.1), np.abs(xr) + 0.1, None),
        "one-hot encoder": (pp.OneHotEncoder(handle_unknown="ignore").fit(xc), xc, None),
        "k-bins discretizer (one-hot)": (pp.KBinsDiscretizer(n_bins=3, encode="onehot-dense")
                                         .fit(xr), xr, None),
        "column transformer": (compose.ColumnTransformer([
            ("s", pp.StandardScaler(), [0, 1]), ("m", pp.MinMaxScaler(), [2, 3, 4])]).fit(xr), xr, None),
        "feature union": (make_union(decomposition.PCA(n_components=2), pp.StandardScaler()).fit(xr), xr, None),
    }
