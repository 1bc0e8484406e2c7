#!/usr/bin/env python3
"""Makes Tests/UpdraftTests/Fixtures/glm: GLM classifiers (Core ML Model field 400) as coremltools'
scikit-learn converter writes them, and what they must give, from scikit-learn itself, not from
Updraft's code.

- binary.mlmodel: LogisticRegression(multi_class="ovr", what the converter takes) on 2 classes (the reference-class encoding, one weight row).
- ovr.mlmodel: LogisticRegression(multi_class="ovr") on 3 classes (one versus rest, a row per class).

For each, glm.json holds the training vectors and labels, test vectors with scikit-learn's
predict_proba, and the weights after an update: scikit-learn's SGDClassifier(loss="log_loss") started
from the converted model's weights (coef_init, intercept_init) and run for 3 epochs over the training
data in order, one example per step, at a constant learning rate, no penalty. That is the update
Updraft makes with miniBatchSize 1, shuffle off and the same learning rate: SGD on each output's log
loss (one versus rest trains each class's row on "this class or not", as SGDClassifier does).

Run once (needs coremltools, numpy and scikit-learn <= 1.5.1, the newest coremltools converts) and
commit the output:
    python3 Tests/Scripts/make_glm_fixtures.py
"""
import json
import os
import warnings

import numpy as np
import coremltools as ct
from sklearn.linear_model import LogisticRegression, SGDClassifier

OUT = os.path.join(os.path.dirname(__file__), "..", "UpdraftTests", "Fixtures", "glm")
D, EPOCHS, LEARNING_RATE = 4, 3, 0.05


def data(rng, n, classes):
    """Gaussian blobs, one per class, scaled so no score is near SGDClassifier's |z| > 18 shortcut."""
    centres = rng.normal(0, 1.5, size=(classes, D))
    y = np.arange(n) % classes
    x = centres[y] + rng.normal(0, 1, size=(n, D))
    return x, y


def make(name, classes, rng):
    x, y = data(rng, 60, classes)
    test, test_y = data(rng, 10, classes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = LogisticRegression(C=0.5, multi_class="ovr").fit(x[:30], y[:30])
    labels = [f"class{c}" for c in range(classes)]
    # The converter names the classes by the fitted model's classes_; string labels read better.
    model.classes_ = np.array(labels)
    mlmodel = ct.converters.sklearn.convert(model, "input", "label")
    mlmodel.save(os.path.join(OUT, f"{name}.mlmodel"))
    spec = mlmodel.get_spec()
    assert spec.WhichOneof("Type") == "glmClassifier", spec.WhichOneof("Type")

    sgd = SGDClassifier(loss="log_loss", penalty=None, learning_rate="constant", eta0=LEARNING_RATE,
                        max_iter=EPOCHS, tol=None, shuffle=False, average=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter reached before convergence: the point is the trajectory.
        # Copies: SGDClassifier trains its coef_init in place.
        sgd.fit(x, np.array(labels)[y], coef_init=model.coef_.copy(), intercept_init=model.intercept_.copy())
    return {
        "model": f"{name}.mlmodel",
        "labels": labels,
        "encoding": spec.glmClassifier.classEncoding,
        "train": {"vectors": x.tolist(), "classes": y.tolist()},
        "test": {"vectors": test.tolist(), "classes": test_y.tolist(), "probabilities": model.predict_proba(test).tolist()},
        "update": {"epochs": EPOCHS, "learningRate": LEARNING_RATE, "miniBatchSize": 1,
                   "weights": sgd.coef_.tolist(), "offsets": sgd.intercept_.tolist()},
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    cases = [make("binary", 2, rng), make("ovr", 3, rng)]
    with open(os.path.join(OUT, "glm.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=1)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
