"""Classical machine-learning models as users export them: scikit-learn, LightGBM and XGBoost.

    python tools/classic_corpus.py OUT_DIR [--only NAME...]

Each model is trained here on a small synthetic data set (seeded: the same files every run) and
converted with the converter its users reach for: skl2onnx for scikit-learn pipelines,
onnxmltools for LightGBM and XGBoost. The files hold what those converters write and neural
exports do not: the ``ai.onnx.ml`` domain (TreeEnsemble, LinearClassifier, SVM, Scaler,
OneHotEncoder, DictVectorizer, ZipMap), string inputs and outputs, a map as input, a
classifier's probabilities as a sequence of maps, several inputs of different types, and batch
dimensions with no name.
Written: ``NAME.onnx``; a model whose converter fails is printed with its message and the run
goes on (exit 1 when any failed). Needs ``scikit-learn``, ``skl2onnx``, ``onnxmltools``,
``lightgbm`` and ``xgboost``.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROWS, FEATURES, SEED = 400, 12, 0


def _data(classes: int = 3):
    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(ROWS, FEATURES)).astype(np.float32)
    weights = rng.normal(size=(FEATURES, classes))
    y = np.argmax(x @ weights + 0.3 * rng.normal(size=(ROWS, classes)), axis=1)
    return x, y


def _regression_data():
    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(ROWS, FEATURES)).astype(np.float32)
    y = (x[:, 0] * 2 - x[:, 1] ** 2 + np.sin(x[:, 2]) + 0.1 * rng.normal(size=ROWS))
    return x, y.astype(np.float32)


def _float_input(n: int = FEATURES):
    from skl2onnx.common.data_types import FloatTensorType
    return [("input", FloatTensorType([None, n]))]


def _skl(estimator, data, options=None, initial_types=None, opset: int = 17):
    from skl2onnx import to_onnx
    x, y = data
    estimator.fit(x, y)
    return to_onnx(estimator, initial_types=initial_types or _float_input(x.shape[1]),
                   options=options, target_opset={"": opset, "ai.onnx.ml": 3})


def logistic_zipmap():
    from sklearn.linear_model import LogisticRegression
    return _skl(LogisticRegression(max_iter=500), _data())


def logistic_no_zipmap():
    from sklearn.linear_model import LogisticRegression
    return _skl(LogisticRegression(max_iter=500), _data(),
                options={LogisticRegression: {"zipmap": False}})


def random_forest():
    from sklearn.ensemble import RandomForestClassifier
    return _skl(RandomForestClassifier(n_estimators=20, max_depth=6, random_state=SEED), _data())


def gradient_boosting_regressor():
    from sklearn.ensemble import GradientBoostingRegressor
    return _skl(GradientBoostingRegressor(n_estimators=30, random_state=SEED), _regression_data())


def scaler_pca_svc():
    from sklearn.decomposition import PCA
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC
    pipe = make_pipeline(StandardScaler(), PCA(n_components=6), SVC(probability=True,
                                                                     random_state=SEED))
    return _skl(pipe, _data())


def mlp_classifier():
    from sklearn.neural_network import MLPClassifier
    return _skl(MLPClassifier(hidden_layer_sizes=(32, 16), max_iter=300, random_state=SEED),
                _data(), options={MLPClassifier: {"zipmap": False}})


def kmeans():
    from sklearn.cluster import KMeans
    return _skl(KMeans(n_clusters=4, n_init=3, random_state=SEED), _data())


def knn_regressor():
    from sklearn.neighbors import KNeighborsRegressor
    return _skl(KNeighborsRegressor(n_neighbors=5), _regression_data())


def isolation_forest():
    from sklearn.ensemble import IsolationForest
    x, _ = _data()
    return _skl(IsolationForest(n_estimators=20, random_state=SEED), (x, None),
                opset=17)


def mixed_columns():
    """Numeric and string columns as separate inputs: OneHotEncoder, Scaler, Concat."""
    import pandas as pd
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    rng = np.random.default_rng(SEED)
    frame = pd.DataFrame({
        "age": rng.normal(40, 10, ROWS).astype(np.float32),
        "income": rng.normal(5, 2, ROWS).astype(np.float32),
        "city": rng.choice(["paris", "lyon", "nice", "lille"], ROWS),
        "plan": rng.choice(["free", "pro"], ROWS),
    })
    y = (frame["age"] > 40).astype(int) ^ (frame["city"] == "nice").astype(int)
    pipe = Pipeline([
        ("columns", ColumnTransformer([
            ("numbers", StandardScaler(), ["age", "income"]),
            ("words", OneHotEncoder(handle_unknown="ignore"), ["city", "plan"]),
        ])),
        ("model", LogisticRegression(max_iter=500)),
    ])
    pipe.fit(frame, y)
    from skl2onnx import to_onnx
    types = [("age", FloatTensorType([None, 1])), ("income", FloatTensorType([None, 1])),
             ("city", StringTensorType([None, 1])), ("plan", StringTensorType([None, 1]))]
    return to_onnx(pipe, initial_types=types, target_opset={"": 17, "ai.onnx.ml": 3})


def dict_vectorizer():
    """Features as one map of name to value (a DictVectorizer), the classifier's probabilities
    as a ZipMap."""
    from skl2onnx.common.data_types import DictionaryType, FloatTensorType, StringTensorType
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    x, y = _data()
    rows = [{f"f{j}": float(v) for j, v in enumerate(row) if v > -0.5} for row in x]
    from skl2onnx import to_onnx
    pipe = make_pipeline(DictVectorizer(sparse=False), LogisticRegression(max_iter=500))
    pipe.fit(rows, y)
    types = [("features", DictionaryType(StringTensorType([1]), FloatTensorType([1])))]
    return to_onnx(pipe, initial_types=types, target_opset={"": 17, "ai.onnx.ml": 3})


def tfidf_text():
    """A text classifier on a string input: StringNormalizer, Tokenizer, TfIdfVectorizer."""
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    rng = np.random.default_rng(SEED)
    words = ["good", "bad", "fast", "slow", "model", "graph", "great", "awful", "ok", "fine"]
    texts = [" ".join(rng.choice(words, 6)) for _ in range(ROWS)]
    y = np.array([("good" in t or "great" in t) for t in texts], dtype=int)
    pipe = make_pipeline(TfidfVectorizer(), LogisticRegression(max_iter=500))
    pipe.fit(texts, y)
    # The converter's StringNormalizer names no locale unless told, and ONNX Runtime then asks
    # for en_US.UTF-8, which minimal machines (containers) lack: name one every machine has.
    options = {TfidfVectorizer: {"tokenexp": r"\w+", "locale": "C.UTF-8"},
               LogisticRegression: {"zipmap": False}}
    return to_onnx(pipe, initial_types=[("text", StringTensorType([None, 1]))],
                   options={id(pipe.steps[0][1]): options[TfidfVectorizer],
                            id(pipe.steps[1][1]): options[LogisticRegression]},
                   target_opset={"": 17, "ai.onnx.ml": 3})


def label_encoder_strings():
    """String labels out of a classifier (a LabelEncoder-like int-to-string map)."""
    from sklearn.tree import DecisionTreeClassifier
    x, y = _data()
    names = np.array(["cat", "dog", "bird"])[y]
    return _skl(DecisionTreeClassifier(max_depth=5, random_state=SEED), (x, names))


def lightgbm_classifier():
    import lightgbm
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType
    x, y = _data()
    model = lightgbm.LGBMClassifier(n_estimators=30, num_leaves=15, random_state=SEED,
                                    verbose=-1).fit(x, y)
    return convert_lightgbm(model, initial_types=[("input", FloatTensorType([None, FEATURES]))],
                            target_opset=15, zipmap=False)


def lightgbm_regressor():
    import lightgbm
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType
    x, y = _regression_data()
    model = lightgbm.LGBMRegressor(n_estimators=30, num_leaves=15, random_state=SEED,
                                   verbose=-1).fit(x, y)
    return convert_lightgbm(model, initial_types=[("input", FloatTensorType([None, FEATURES]))],
                            target_opset=15)


def xgboost_classifier():
    import xgboost
    from onnxmltools import convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType
    x, y = _data()
    model = xgboost.XGBClassifier(n_estimators=30, max_depth=4, random_state=SEED).fit(x, y)
    return convert_xgboost(model, initial_types=[("input", FloatTensorType([None, FEATURES]))],
                           target_opset=15)


MODELS: dict[str, Callable] = {f.__name__: f for f in (
    logistic_zipmap, logistic_no_zipmap, random_forest, gradient_boosting_regressor,
    scaler_pca_svc, mlp_classifier, kmeans, knn_regressor, isolation_forest, mixed_columns,
    dict_vectorizer, tfidf_text, label_encoder_strings, lightgbm_classifier, lightgbm_regressor,
    xgboost_classifier,
)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", nargs="+", choices=sorted(MODELS), metavar="NAME")
    args = parser.parse_args(argv)
    import onnx
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name in args.only or MODELS:
        try:
            model = MODELS[name]()
            onnx.checker.check_model(model)
            onnx.save(model, args.out / f"{name}.onnx")
            print(f"{name}: {len(model.graph.node)} nodes")
        except Exception as error:  # a converter's failure is reported, the run goes on
            failed += 1
            print(f"{name}: FAILED {type(error).__name__}: {error}", file=sys.stderr)
            traceback.print_exc(limit=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
