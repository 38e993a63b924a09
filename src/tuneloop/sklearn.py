"""scikit-learn estimators: `TuneloopClassifier` and `TuneloopRegressor` fine-tune a transformer on texts in
`fit(X, y)` through `tuneloop.train`, so they work in `Pipeline`, `cross_val_score`, `GridSearchCV` and `clone`.

    from tuneloop.sklearn import TuneloopClassifier
    from sklearn.model_selection import cross_val_score

    clf = TuneloopClassifier(epochs=2)
    cross_val_score(clf, texts, labels, cv=3)       # three full training runs
    clf.fit(texts, labels).predict(["a new text"])  # labels of the types y had

What it costs: every `fit` is a full tuneloop training run (a run folder written to disk, the model saved and
loaded back), so `cross_val_score(cv=5)` trains five models and a `GridSearchCV` one per candidate and fold, plus
the refit. X is a list (or Series, 1-column DataFrame, 1-D array) of texts, or a 2-column DataFrame / list of
(first, second) pairs for sentence-pair tasks.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from tuneloop.config.options import with_trait

# options the estimator decides itself (`sklearn="own"` in the options): the data and the run folder come from fit,
# the problem type from the class
OWN_OPTIONS = with_trait("sklearn", "own")


def as_texts(X, name: str = "X") -> list:
    """X as tuneloop takes texts: a list of strings, or of (first, second) pairs."""
    from tuneloop.exceptions import DataError

    if isinstance(X, (str, bytes)):
        raise DataError(f"{name}: give a list of texts (or of (first, second) pairs), not a single text")
    kind = type(X).__name__
    if kind == "DataFrame":
        columns = [str(c) for c in X.columns]
        if len(columns) not in (1, 2):
            raise DataError(f"{name}: a DataFrame of one text column, or two for pairs; got {len(columns)} columns "
                            f"({', '.join(columns)}); select the text column(s)")
        parts = [X.iloc[:, i].tolist() for i in range(len(columns))]
        return parts[0] if len(parts) == 1 else list(zip(*parts, strict=True))
    if hasattr(X, "ndim") and hasattr(X, "tolist"):            # a Series or a numpy array
        if X.ndim == 1:
            return X.tolist()
        if X.ndim == 2 and X.shape[1] in (1, 2):
            return [row[0] if len(row) == 1 else tuple(row) for row in X.tolist()]
        raise DataError(f"{name}: an array of texts (1-D), or of shape (n, 2) for pairs; got shape {X.shape}")
    try:
        items = list(X)
    except TypeError:
        raise DataError(f"{name}: give a list of texts (or of (first, second) pairs), got {kind}") from None
    return [tuple(item) if isinstance(item, list) else item for item in items]


def as_targets(y) -> list:
    """y as a list of plain Python values (a 1-column frame or (n, 1) array read as its column). Several columns
    (scikit-learn's multi-label indicator matrix, or multi-output) are refused: the estimators take one target."""
    from tuneloop.exceptions import DataError

    if type(y).__name__ == "DataFrame" and y.shape[1] == 1:
        y = y.iloc[:, 0]
    if hasattr(y, "ndim") and y.ndim == 2 and y.shape[1] == 1:
        y = y.reshape(-1) if hasattr(y, "reshape") else y
    if hasattr(y, "ndim") and y.ndim > 1:
        raise DataError(f"y: {y.shape[1]} columns, but these estimators learn one target per text; for several "
                        "labels per text (multi-label), call tuneloop.train with a list of labels per text")
    return list(y.tolist() if hasattr(y, "tolist") else y)


def _missing(value) -> bool:
    """None, NaN, pandas' NA / NaT: no value."""
    return value is None or (isinstance(value, float) and value != value) or type(value).__name__ in ("NAType",
                                                                                                       "NaTType")


def check_fit_data(texts: list, targets: list, names: tuple[str, str] = ("X", "y")) -> None:
    """What fit takes, checked in the estimator's own words (tuneloop's reading would name `train=` and a column
    `label` the caller never wrote): a text in every row of X, one target in every row of y. A y of lists (labels
    per text) is multi-label, which tuneloop.train does; a missing label had been said as "labels of one type
    that can be sorted"."""
    from tuneloop.exceptions import DataError

    x, y = names
    if len(texts) != len(targets):
        raise DataError(f"{x}, {y}: {len(texts)} texts but {len(targets)} labels; give {x} and {y} one row per "
                        "example")
    if not texts:
        raise DataError(f"{x}, {y}: no rows; give at least one example")
    if any(isinstance(t, (tuple, list)) for t in texts):
        bad = next((i for i, t in enumerate(texts) if not (isinstance(t, (tuple, list)) and len(t) == 2)), None)
        if bad is not None:
            raise DataError(f"{x}[{bad}], row {bad + 1}: give every row a text, or every row a (first, second) pair "
                            f"(got {str(texts[bad])[:60]})")
    for i, text in enumerate(texts):
        parts = text if isinstance(text, tuple) else (text,)
        if any(_missing(t) or (isinstance(t, str) and not t.strip()) for t in parts):
            raise DataError(f"{x}[{i}], row {i + 1}: no text (got {text!r}); give every row a text, or drop the row "
                            f"from {x} and {y}")
    check_targets(targets, names)


def check_targets(targets: list, names: tuple[str, str] = ("X", "y")) -> None:
    """One target in every row of y (a list is several labels, which the estimators do not learn)."""
    from tuneloop.exceptions import DataError

    x, y = names
    for i, value in enumerate(targets):
        if isinstance(value, (list, tuple, set, frozenset)) or getattr(value, "ndim", 0) > 0:
            raise DataError(f"{y}[{i}], row {i + 1}: several labels ({str(value)[:60]}), but these estimators learn "
                            "one target per text; for several labels per text (multi-label), call tuneloop.train "
                            "with a list of labels per text")
        if _missing(value) or (isinstance(value, str) and not value.strip()):
            raise DataError(f"{y}[{i}], row {i + 1}: no label (got {value!r}); give every text its label, or drop "
                            f"the row from {x} and {y}")


def sorted_classes(labels: list) -> list:
    """The distinct labels of y, sorted, as `classes_` holds them."""
    from tuneloop.exceptions import DataError

    try:
        return sorted(set(labels))
    except TypeError:
        raise DataError("y: labels of one type (all numbers or all texts) that can be sorted") from None


def _say_merged(classes: list, read_as: list) -> None:
    """Two values of y that tuneloop reads as one class (' pos' and 'pos': spaces around a label are dropped; '1'
    and '1.0': numbers by value) would be two entries of classes_ for one column of the model: refused."""
    from tuneloop.exceptions import DataError

    first: dict = {}
    for value, read in zip(classes, read_as, strict=True):
        if read in first:
            raise DataError(f"y: the labels {first[read]!r} and {value!r} are one class to tuneloop (labels are read "
                            "as text without surrounding spaces, numbers by value); give each class one value")
        first[read] = value


class _TuneloopEstimator(BaseEstimator):
    """The options, the run folders and the conversions both estimators share."""

    _problem_type = ""

    def __init__(self, model: str = "minilm", *, epochs: int = 3, lr: float = 5e-5, batch_size: int = 8,
                 max_length: int | None = None, seed: int = 42, weight_decay: float = 0.01,
                 warmup_ratio: float = 0.0, quiet: bool = True, report: bool = False, output_dir: str | None = None,
                 options: dict | None = None):
        self.model = model
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.max_length = max_length
        self.seed = seed
        self.weight_decay = weight_decay
        self.warmup_ratio = warmup_ratio
        self.quiet = quiet
        self.report = report
        self.output_dir = output_dir
        self.options = options

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.string = True          # X holds texts, not numbers
        return tags

    # -- training ----------------------------------------------------------------------------------------------
    def _train_options(self) -> dict:
        from tuneloop.exceptions import ConfigError

        params = {name: getattr(self, name) for name in ("model", "epochs", "lr", "batch_size", "max_length", "seed",
                                                          "weight_decay", "warmup_ratio", "quiet", "report")}
        if self.options is not None and not isinstance(self.options, dict):
            raise ConfigError(f"options: a dict of TrainConfig options (e.g. {{'calibrate': 'none'}}), got "
                              f"{type(self.options).__name__}")
        extra = dict(self.options or {})
        for key in extra:
            if key in params:
                raise ConfigError(f"options: {key!r} is a parameter of {type(self).__name__}; set {key}=... "
                                  "instead (so get_params, clone and GridSearchCV see it)")
            if key in OWN_OPTIONS:
                raise ConfigError(f"options: {key!r} is the estimator's own (the data come from fit(X, y), the run "
                                  f"folder from output_dir=, the problem type from the class)")
        # a fit into a temporary folder (no output_dir) keeps its model in memory, predicting in fp32, and the
        # folder goes: the precision gate (an ONNX export and a pass of each route, 20 s for MiniLM) would be read
        # by nothing, in every fit of a cross_val_score or GridSearchCV
        gate = {} if self.output_dir is not None else {"precision_gate": "off"}
        return {**params, **gate, **extra, "problem_type": self._problem_type}

    def _fit(self, X, y, validation, fitted=None):
        """One training run; `fitted(classifier, labels)` sets the subclass's attributes (before the estimator
        counts as fitted: an error there leaves it as it was)."""
        from tuneloop.api import train
        from tuneloop.data.memory import PAIR_COLUMNS, fit_table, in_fit_words
        from tuneloop.exceptions import ConfigError, DataError

        data = (as_texts(X), as_targets(y))
        check_fit_data(*data)
        pairs = bool(data[0]) and all(isinstance(t, tuple) for t in data[0])
        held_out = None if validation is None else (as_texts(validation[0], "validation X"),
                                                    as_targets(validation[1]))
        if held_out is not None:
            check_fit_data(*held_out, names=("validation X", "validation y"))
        # tables named by X and y: tuneloop's reading would say `train= (lists)` and a column 'label'
        tables = [(fit_table(data, "train"), ("X", "y"))] + ([] if held_out is None else [
            (fit_table(held_out, "validation", ("validation X", "validation y")), ("validation X", "validation y"))])
        options = self._train_options()
        temporary = self.output_dir is None
        if temporary:
            folder = tempfile.mkdtemp(prefix="tuneloop-fit-")
        else:
            os.makedirs(self.output_dir, exist_ok=True)
            folder = tempfile.mkdtemp(prefix="fit-", dir=self.output_dir)
        try:
            # the columns (texts, labels) become, named: tuneloop's detection would read "text" alone
            try:
                result = train(train=tables[0][0], validation=tables[1][0] if held_out else None, output_dir=folder,
                               label_column="label", text_columns=list(PAIR_COLUMNS if pairs else PAIR_COLUMNS[:1]),
                               **options)
            except ConfigError as e:            # only options= can hold an unknown one: said as its
                if not str(e).startswith("unknown option"):
                    raise
                raise ConfigError(f"options: {e}") from None
            except DataError as e:
                said = str(e)
                for table, names in tables:
                    said = in_fit_words(said, table, names)
                if said == str(e):
                    raise
                raise DataError(said) from None
            classifier = result.classifier
            if fitted is not None:
                fitted(classifier, data[1])
        except BaseException:
            if temporary:
                shutil.rmtree(folder, ignore_errors=True)
            elif not any(os.scandir(folder)):           # stopped before writing anything (a bad option)
                os.rmdir(folder)
            raise
        self.cleanup()                                  # the previous fit's temporary folder, if any
        self._finalizer = weakref.finalize(self, shutil.rmtree, folder, True) if temporary else None
        self.classifier_, self.results_, self.output_dir_ = classifier, dict(result), folder
        return self

    def cleanup(self) -> None:
        """Remove the temporary run folder of the last fit now (with `output_dir=None`; a folder under a given
        `output_dir` is kept). The fitted model stays in memory: predict still works. Without this call the folder
        goes when the estimator is garbage-collected, refitted, or the interpreter exits."""
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None and finalizer.alive:
            finalizer()
            self.output_dir_ = None
        self._finalizer = None

    def __getstate__(self):                             # pickle, deepcopy: a copy does not own the temporary folder
        state = dict(self.__dict__)
        state.pop("_finalizer", None)
        return state

    def _items(self, X) -> list:
        check_is_fitted(self, "classifier_")
        return as_texts(X)


class TuneloopClassifier(ClassifierMixin, _TuneloopEstimator):
    """Fine-tune a transformer to classify texts (or pairs of texts), as a scikit-learn classifier.

    Each `fit` is a full `tuneloop.train` run: the model is trained on X, saved into a run folder and loaded back.
    Like `tuneloop.train` with training data only, it holds out `validation_split` (10%) of X, stratified, to
    measure (`results_["eval"]`) and fit the decision rule on, so the model trains on the other 90%; `fit(X, y,
    validation=(X_val, y_val))` validates on given rows instead (in a Pipeline, X_val does not go through the
    earlier steps). `score` is accuracy.

    Parameters are tuneloop's training options with its defaults (`tuneloop train --help` explains each):
    model, epochs, lr, batch_size, max_length, seed, weight_decay, warmup_ratio; except `quiet=True` (no progress
    bars, so cross_val_score's output stays readable) and `report=False` (report.html costs about 2 s per fit).
    `options`: a dict of any other TrainConfig option (e.g. `{"calibrate": "none", "class_weights": "balanced"}`).
    `output_dir`: None runs each fit in a new temporary folder, removed when the estimator is garbage-collected or
    refitted, or by `cleanup()`; a folder: each fit writes a run folder `fit-XXXX` under it, kept.

    Fitted attributes: `classes_` (the sorted labels of y, as an array of their type: int labels come back as
    ints), `classifier_` (the trained `tuneloop.Classifier`), `output_dir_` (this fit's run folder), `results_`
    (what `tuneloop.train` returned: results.json's contents).
    """

    _problem_type = "single_label_classification"

    def fit(self, X, y, *, validation=None) -> "TuneloopClassifier":
        """Train on texts X with labels y (any hashable values of one type). `validation`: (X_val, y_val) to
        validate on instead of a held-out part of X."""
        from tuneloop.data.labels import LabelEncoder
        from tuneloop.data.sources import _label_text

        def fitted(classifier, labels):
            classes = sorted_classes(labels)
            schema = classifier.label_schema
            encode = LabelEncoder(schema, "y")
            # the classifier's column of each class (tuneloop orders "9" before "10"; sorted() does not)
            self._columns = [encode(_label_text(c), i) for i, c in enumerate(classes, start=1)]
            _say_merged(classes, self._columns)
            self._class_of_name = {schema.names[col]: i for i, col in enumerate(self._columns)}
            self.classes_ = np.asarray(classes)

        from tuneloop.exceptions import DataError

        values = as_targets(y)
        check_targets(values)                                  # before the classes are sorted
        if any(isinstance(v, float) and v == v and not v.is_integer() for v in values):   # NaN: no label
            raise DataError("y: continuous values (numbers with fractions) are not classes; for a number per text "
                            "use TuneloopRegressor")
        given = sorted_classes(values)                          # ' pos' beside 'pos': said before training
        _say_merged(given, [_label_text(c) for c in given])
        return self._fit(X, y, validation, fitted)

    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy of `predict` on (X, y); a row it abstains on (`abstain_below`) counts as wrong."""
        predicted, truth = self.predict(X), as_targets(y)
        if len(predicted) != len(truth):
            raise ValueError(f"X has {len(predicted)} rows but y has {len(truth)}")
        hits = np.asarray([bool(p == t) for p, t in zip(predicted.tolist(), truth, strict=True)], dtype=float)
        return float(np.average(hits, weights=sample_weight)) if len(hits) else float("nan")

    def predict(self, X) -> np.ndarray:
        """Labels (values of `classes_`) under the saved decision rule (calibration, a `decision: threshold`
        cut-off; with `abstain_below` an abstained row gets `abstain_label`, and the array is then of objects)."""
        items = self._items(X)
        rows = self.classifier_.predict(items, raw=False)
        found = [self._class_of_name.get(row["label"]) for row in rows]
        if all(i is not None for i in found):
            return self.classes_[np.asarray(found, dtype=int)]
        return np.asarray([self.classes_[i] if i is not None else row["label"]
                           for i, row in zip(found, rows, strict=True)], dtype=object)

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, a row per text and a column per class in `classes_` order: calibrated by the
        saved temperature (what predict's rule reads; the default `calibrate: temperature`), so they are honest
        probabilities rather than the raw softmax; a threshold rule's cut-off is not applied to them."""
        items = self._items(X)
        return self.classifier_.predict_proba(items, raw=False)[:, self._columns]


class TuneloopRegressor(RegressorMixin, _TuneloopEstimator):
    """Fine-tune a transformer to predict a number from texts (or pairs of texts), as a scikit-learn regressor.

    Each `fit` is a full `tuneloop.train` run with `problem_type: regression` (see `TuneloopClassifier` for what
    that costs, the parameters and `output_dir`); `predict` returns floats, `score` is R².
    """

    _problem_type = "regression"

    def fit(self, X, y, *, validation=None) -> "TuneloopRegressor":
        """Train on texts X with numeric targets y. `validation`: (X_val, y_val) instead of a held-out part of X."""
        return self._fit(X, y, validation)

    def predict(self, X) -> np.ndarray:
        """The predicted number per text, as a float array (as the model computes it: not rounded as predict's rows
        are)."""
        items, _ = self.classifier_.items(self._items(X))
        classifier = self.classifier_
        return np.asarray(classifier.objective.predictions(classifier.logits(items)), dtype=float).reshape(-1)
