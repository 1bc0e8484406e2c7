#!/usr/bin/env python3
"""The article's pipeline from a PyTorch CNN: an embedding network traced in PyTorch and converted by
coremltools (`ct.convert(..., convert_to="neuralnetwork")`), followed by an empty updatable k-NN made
by coremltools' KNearestNeighborsClassifierBuilder, as one PipelineClassifier.

    Tests/UpdraftTests/Fixtures/knn/torch_pipeline.mlmodel   the pipeline (k-NN empty, k = 3, distance weighting)
    Tests/UpdraftTests/Fixtures/knn/torch_train/<label>/*.png   12 RGB 16x16 images, 4 per label, to store
    Tests/UpdraftTests/Fixtures/knn/torch_queries/<label>/*.png  9 held-out images, 3 per label
    Tests/UpdraftTests/Fixtures/knn/torch_pipeline.json      PyTorch's embedding of every train image (in the
        order Updraft lists the folder: labels sorted, files sorted), and scikit-learn's
        KNeighborsClassifier(algorithm="brute", weights="distance", n_neighbors=3) fitted on those
        embeddings: its predictions and probabilities for the queries.

Updraft's update must store PyTorch's embeddings (within 1e-4) and then answer as scikit-learn does.

Run once (needs torch, coremltools, numpy, Pillow, scikit-learn) and commit the output:
    python3 Tests/Scripts/make_knn_torch_fixtures.py
"""
import json
import os
import shutil

import numpy as np
import torch
import coremltools as ct
from PIL import Image
from coremltools.models import datatypes
from coremltools.models.nearest_neighbors import KNearestNeighborsClassifierBuilder
from coremltools.models.pipeline import PipelineClassifier
from sklearn.neighbors import KNeighborsClassifier

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "UpdraftTests", "Fixtures", "knn")
LABELS = ["blue", "green", "red"]
D = 12
rng = np.random.default_rng(23)
torch.manual_seed(23)


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16, D)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        x = torch.relu(self.c2(x))
        x = torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def write_images(folder, per_label):
    shutil.rmtree(folder, ignore_errors=True)
    for c, label in enumerate(LABELS):
        os.makedirs(os.path.join(folder, label))
        for i in range(per_label):
            base = np.zeros((16, 16, 3))
            base[..., c] = 150
            pixels = np.clip(base + rng.integers(0, 100, size=(16, 16, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels, "RGB").save(os.path.join(folder, label, f"{i:02d}.png"))


def load(folder):
    """Images and labels in Updraft's listing order, as float tensors scaled by 1/255."""
    xs, ys = [], []
    for label in sorted(os.listdir(folder)):
        for name in sorted(os.listdir(os.path.join(folder, label))):
            img = np.asarray(Image.open(os.path.join(folder, label, name)).convert("RGB"), dtype=np.float32) / 255.0
            xs.append(torch.from_numpy(img).permute(2, 0, 1))
            ys.append(label)
    return torch.stack(xs), ys


def main():
    write_images(os.path.join(OUT, "torch_train"), 4)
    write_images(os.path.join(OUT, "torch_queries"), 3)
    net = Embed().eval()
    traced = torch.jit.trace(net, torch.rand(1, 3, 16, 16))
    mlmodel = ct.convert(traced, inputs=[ct.ImageType(name="image", shape=(1, 3, 16, 16), scale=1 / 255.0)],
                         convert_to="neuralnetwork", minimum_deployment_target=ct.target.iOS13)
    emb = mlmodel.get_spec()
    ct.utils.rename_feature(emb, emb.description.output[0].name, "embedding")
    emb.description.output[0].type.multiArrayType.shape[:] = [D]
    emb.description.output[0].type.multiArrayType.dataType = ct.proto.FeatureTypes_pb2.ArrayFeatureType.FLOAT32

    knn = KNearestNeighborsClassifierBuilder(input_name="embedding", output_name="label", number_of_dimensions=D,
                                             default_class_label="unknown", number_of_neighbors=3,
                                             weighting_scheme="inverse_distance")
    knn.spec.description.input[0].type.multiArrayType.shape[:] = [D]
    p = PipelineClassifier([("image", datatypes.Array(3, 16, 16))], ["unknown"],
                           training_features=[("image", datatypes.Array(3, 16, 16)), ("label", datatypes.String())])
    p.add_model(emb)
    p.add_model(knn.spec)
    p.spec.description.input[0].CopyFrom(emb.description.input[0])
    p.spec.description.trainingInput[0].CopyFrom(emb.description.input[0])
    p.spec.pipelineClassifier.pipeline.names.extend(["embedding", "knn"])
    p.spec.isUpdatable = True
    p.spec.pipelineClassifier.pipeline.models[1].isUpdatable = True
    p.spec.specificationVersion = 4
    ct.utils.save_spec(p.spec, os.path.join(OUT, "torch_pipeline.mlmodel"))

    with torch.no_grad():
        tx, ty = load(os.path.join(OUT, "torch_train"))
        qx, qy = load(os.path.join(OUT, "torch_queries"))
        te, qe = net(tx).numpy(), net(qx).numpy()
    sk = KNeighborsClassifier(n_neighbors=3, algorithm="brute", weights="distance").fit(te, ty)
    info = {"labels": LABELS, "dimension": D, "trainEmbeddings": te.tolist(), "trainLabels": ty,
            "queryLabels": qy, "predicted": sk.predict(qe).tolist(), "probabilities": sk.predict_proba(qe).tolist(),
            "classes": sk.classes_.tolist(), "torch": torch.__version__, "coremltools": ct.__version__}
    with open(os.path.join(OUT, "torch_pipeline.json"), "w") as f:
        json.dump(info, f, indent=1)


main()
