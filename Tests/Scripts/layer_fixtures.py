"""The frame the layer fixture scripts share (make_resample_fixtures.py, make_reduce_fixtures.py): a
model x [C, H, W] -> a 1x1 convolution "mix" (updatable) -> the layers under test -> flatten -> inner
product "fc" (frozen) -> softmax "probs" with categorical cross-entropy and SGD, built with coremltools'
NeuralNetworkBuilder; and the JSON of a batch of inputs, labels and numpy's value of every checked blob
(read by Tests/UpdraftTests/Support/LayerFixtureSupport.swift).
"""
import contextlib
import io
import json
import os

import numpy as np

with contextlib.redirect_stderr(io.StringIO()):  # coremltools warns about missing macOS-only parts
    import coremltools
    from coremltools.models import datatypes
    from coremltools.models.neural_network import NeuralNetworkBuilder, SgdParams


class Frame:
    """Sizes and the seeded generator of one script's fixtures; every draw goes through `rand`."""

    def __init__(self, folder, seed, c, h, w, mixed, classes, batch):
        self.out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "UpdraftTests", "Fixtures", folder)
        self.rng = np.random.RandomState(seed)
        self.c, self.h, self.w, self.mixed, self.classes, self.batch = c, h, w, mixed, classes, batch

    def rand(self, *shape, scale=0.5):
        return self.rng.uniform(-scale, scale, size=shape).astype(np.float32)

    def start(self, name):
        """The builder with x -> mix (1x1 convolution, C -> mixed channels), and numpy's mix."""
        b = NeuralNetworkBuilder([("x", datatypes.Array(self.c, self.h, self.w))], [("probs", datatypes.Array(self.classes))])
        b.spec.description.metadata.shortDescription = f"Updraft fixture: {name}"
        w, bias = self.rand(1, 1, self.c, self.mixed, scale=1.0), self.rand(self.mixed)
        b.add_convolution("mix", kernel_channels=self.c, output_channels=self.mixed, height=1, width=1, stride_height=1,
                          stride_width=1, border_mode="valid", groups=1, W=w, b=bias, has_bias=True,
                          input_name="x", output_name="mix")
        return b, lambda x: np.einsum("co,chw->ohw", w[0, 0], x) + bias[:, None, None]

    def head(self, b, top, shape):
        """top -> flatten -> fc (frozen) -> softmax "probs"; the loss and SGD."""
        count = int(np.prod(shape))
        fc_w, fc_b = self.rand(self.classes, count, scale=0.2), self.rand(self.classes)
        b.add_flatten("flatten", mode=0, input_name=top, output_name="flat")
        b.add_inner_product("fc", W=fc_w, b=fc_b, input_channels=count, output_channels=self.classes, has_bias=True,
                            input_name="flat", output_name="logits")
        b.add_softmax("softmax", "logits", "probs")
        b.make_updatable(["mix"])
        with contextlib.redirect_stdout(io.StringIO()):
            b.set_categorical_cross_entropy_loss(name="loss", input="probs")
        b.set_sgd_optimizer(SgdParams(lr=0.5, batch=self.batch))
        b.set_epochs(3)
        return fc_w, fc_b

    def write(self, name, make):
        """Builds `make()` = (builder, forward, top blob, its shape), saves the model and the JSON."""
        b, forward, top, shape = make()
        fc_w, fc_b = self.head(b, top, shape)
        os.makedirs(self.out, exist_ok=True)
        path = os.path.join(self.out, name + ".mlmodel")
        coremltools.utils.save_spec(b.spec, path)
        inputs = self.rand(self.batch, self.c, self.h, self.w, scale=1.0)
        labels = [i % self.classes for i in range(self.batch)]
        blobs = {}
        for x in inputs:
            values = forward(x.astype(np.float64))
            logits = fc_w.astype(np.float64) @ values[top].reshape(-1) + fc_b
            e = np.exp(logits - logits.max())
            values["probs"] = e / e.sum()
            for k, v in values.items():
                entry = blobs.setdefault(k, {"shape": list(v.shape), "values": []})
                entry["values"] += [float(f"{t:.9g}") for t in v.reshape(-1)]
        golden = {"model": name + ".mlmodel", "coremltools": coremltools.__version__,
                  "layers": [[l.name, l.WhichOneof("layer")] for l in b.spec.neuralNetwork.layers],
                  "inputShape": [self.c, self.h, self.w], "inputs": [float(t) for t in inputs.reshape(-1)], "labels": labels,
                  "blobs": blobs}
        with open(os.path.join(self.out, name + ".json"), "w") as f:
            json.dump(golden, f, indent=1)
            f.write("\n")
        print(f"wrote {path} ({os.path.getsize(path)} bytes): " + ", ".join(f"{k} {v['shape']}" for k, v in blobs.items()))
