#!/usr/bin/env python3
"""Builds the small Core ML models that Updraft's tests read, with coremltools, the way its users do.

    python3 Tests/Scripts/make_fixtures.py [OUTDIR]      (default: Tests/UpdraftTests/Fixtures)

The outputs are committed; rerun this only to change or add a fixture. Weights come from a fixed
numpy seed, so reruns with the same coremltools give the same files. Each fixture is a few KB.
"""
import contextlib
import io
import json
import os
import sys
import zlib

import numpy as np

with contextlib.redirect_stderr(io.StringIO()):  # coremltools warns about missing macOS-only parts
    import coremltools
    from coremltools.models import datatypes
    from coremltools.models.neural_network import NeuralNetworkBuilder, SgdParams, AdamParams
    from coremltools.proto import NeuralNetwork_pb2

rng = np.random.RandomState(20240601)


def rand(*shape):
    return rng.uniform(-0.5, 0.5, size=shape).astype(np.float32)


def quiet(fn, *args, **kwargs):
    """coremltools prints a line for every loss layer it adds; keep the output readable."""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


EXPECTED = {}


def describe_weights(w):
    """What coremltools reads from a WeightParams: count, CRC-32 of the float32 little-endian bytes
    (float16 widened), the first values and the flag. None for quantized or raw weights."""
    if w.HasField("quantization") or len(w.rawValue) or len(w.int8RawValue):
        return None
    if len(w.float16Value):
        values = np.frombuffer(w.float16Value, dtype="<f2").astype("<f4")
    else:
        values = np.asarray(w.floatValue, dtype="<f4")
    return {"count": int(len(values)), "crc32": zlib.crc32(values.tobytes()) & 0xFFFFFFFF,
            "first": [float(v) for v in values[:4]], "isUpdatable": bool(w.isUpdatable)}


def save(builder_or_spec, outdir, name):
    spec = builder_or_spec.spec if hasattr(builder_or_spec, "spec") else builder_or_spec
    path = os.path.join(outdir, name)
    coremltools.utils.save_spec(spec, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    # Record what coremltools reads back, for the Swift tests to compare Updraft's reading with.
    spec = coremltools.utils.load_spec(path)
    kind = spec.WhichOneof("Type")
    nn = getattr(spec, kind)
    layers = []
    for layer in nn.layers:
        t = layer.WhichOneof("layer")
        entry = {"name": layer.name, "type": t, "isUpdatable": bool(layer.isUpdatable)}
        if t in ("convolution", "innerProduct"):
            params = getattr(layer, t)
            entry["weights"] = describe_weights(params.weights)
            entry["bias"] = describe_weights(params.bias) if params.hasBias else None
        layers.append(entry)
    EXPECTED[name] = {"kind": kind, "specificationVersion": spec.specificationVersion,
                      "isUpdatable": bool(spec.isUpdatable), "layers": layers,
                      "inputs": [f.name for f in spec.description.input],
                      "outputs": [f.name for f in spec.description.output],
                      "trainingInputs": [f.name for f in spec.description.trainingInput]}


def dense_classifier(optimizer):
    """4 features -> dense 8 -> ReLU -> dense 3 -> softmax, string labels; both dense layers updatable."""
    inputs = [("features", datatypes.Array(4))]
    outputs = [("labelProbability", None)]  # set_class_labels adds the label output
    b = NeuralNetworkBuilder(inputs, outputs, mode="classifier")
    b.add_inner_product("dense1", W=rand(8, 4), b=rand(8), input_channels=4, output_channels=8,
                        has_bias=True, input_name="features", output_name="dense1_out")
    b.add_activation("relu1", "RELU", "dense1_out", "relu1_out")
    b.add_inner_product("dense2", W=rand(3, 8), b=rand(3), input_channels=8, output_channels=3,
                        has_bias=True, input_name="relu1_out", output_name="logits")
    b.add_softmax("softmax", "logits", "labelProbability")
    if optimizer == "sgd":
        b.set_class_labels(["cat", "dog", "bird"], predicted_feature_name="label",
                           prediction_blob="labelProbability")
    else:
        b.set_class_labels([10, 20, 30], predicted_feature_name="label",
                           prediction_blob="labelProbability")
    b.make_updatable(["dense1", "dense2"])
    quiet(b.set_categorical_cross_entropy_loss, name="lossLayer", input="labelProbability")
    if optimizer == "sgd":
        sgd = SgdParams(lr=0.01, batch=8, momentum=0.9)
        sgd.set_lr(0.01, 0.0001, 1.0)
        sgd.set_batch(8, [1, 2, 4, 8, 16])
        sgd.set_momentum(0.9, 0.0, 1.0)
        b.set_sgd_optimizer(sgd)
        b.set_epochs(5, [1, 5, 10])
        b.set_shuffle(seed=42)
    else:
        adam = AdamParams(lr=0.001, batch=4, beta1=0.9, beta2=0.999, eps=1e-8)
        adam.set_lr(0.001, 1e-5, 0.1)
        adam.set_batch(4, [2, 4, 8])
        adam.set_beta1(0.9, 0.5, 0.99)
        adam.set_beta2(0.999, 0.9, 0.9999)
        adam.set_eps(1e-8, 1e-10, 1e-4)
        b.set_adam_optimizer(adam)
        b.set_epochs(3)
    b.spec.description.metadata.shortDescription = "Updraft fixture: dense classifier"
    b.spec.description.metadata.author = "Updraft tests"
    return b


def mse_regressor():
    """3 inputs -> dense 6 -> tanh -> dense 2, mean squared error; both dense layers updatable."""
    inputs = [("x", datatypes.Array(3))]
    outputs = [("y", datatypes.Array(2))]
    b = NeuralNetworkBuilder(inputs, outputs, mode="regressor")
    b.add_inner_product("hidden", W=rand(6, 3), b=rand(6), input_channels=3, output_channels=6,
                        has_bias=True, input_name="x", output_name="hidden_out")
    b.add_activation("tanh", "TANH", "hidden_out", "tanh_out")
    b.add_inner_product("out", W=rand(2, 6), b=None, input_channels=6, output_channels=2,
                        has_bias=False, input_name="tanh_out", output_name="y")
    b.make_updatable(["hidden", "out"])
    quiet(b.set_mean_squared_error_loss, name="mse", input_feature=("y", datatypes.Array(2)))
    sgd = SgdParams(lr=0.05, batch=2)
    sgd.set_batch(2, [1, 2, 4])
    b.set_sgd_optimizer(sgd)
    b.set_epochs(20, [10, 20, 40])
    return b


def conv_image_classifier():
    """16x16 RGB image (scaled by 1/255) -> conv 3x3 same 4ch -> ReLU -> max pool 2x2 -> batchnorm
    -> flatten -> dense 2 -> softmax; conv and dense updatable, batchnorm frozen."""
    inputs = [("image", datatypes.Array(3, 16, 16))]
    outputs = [("classLabelProbs", None)]
    b = NeuralNetworkBuilder(inputs, outputs, mode="classifier")
    # add_convolution takes weights as (height, width, kernel_channels, output_channels).
    b.add_convolution("conv", kernel_channels=3, output_channels=4, height=3, width=3,
                      stride_height=1, stride_width=1, border_mode="same", groups=1,
                      W=rand(3, 3, 3, 4), b=rand(4), has_bias=True,
                      input_name="image", output_name="conv_out")
    b.add_activation("relu", "RELU", "conv_out", "relu_out")
    b.add_pooling("pool", height=2, width=2, stride_height=2, stride_width=2, layer_type="MAX",
                  padding_type="VALID", input_name="relu_out", output_name="pool_out")
    b.add_batchnorm("bn", channels=4, gamma=rand(4) + 1, beta=rand(4), mean=rand(4),
                    variance=np.abs(rand(4)) + 0.5, input_name="pool_out", output_name="bn_out")
    b.add_flatten("flatten", mode=0, input_name="bn_out", output_name="flat")
    b.add_inner_product("dense", W=rand(2, 4 * 8 * 8), b=rand(2), input_channels=256,
                        output_channels=2, has_bias=True, input_name="flat", output_name="logits")
    b.add_softmax("softmax", "logits", "classLabelProbs")
    b.set_class_labels(["no", "yes"], predicted_feature_name="classLabel",
                       prediction_blob="classLabelProbs")
    b.set_pre_processing_parameters(image_input_names=["image"], is_bgr=False,
                                    image_scale=1 / 255.0, red_bias=-0.5, green_bias=-0.5, blue_bias=-0.5)
    b.make_updatable(["conv", "dense"])
    quiet(b.set_categorical_cross_entropy_loss, name="loss", input="classLabelProbs")
    sgd = SgdParams(lr=0.001, batch=4, momentum=0.0)
    sgd.set_batch(4, [1, 4, 16])
    b.set_sgd_optimizer(sgd)
    b.set_epochs(10, [1, 10, 50])
    return b


def concat_branches():
    """Two updatable conv branches concatenated before the classifier: Core ML refuses to
    back-propagate through concat, Updraft can (the validator warns)."""
    inputs = [("data", datatypes.Array(2, 6, 6))]
    outputs = [("probs", datatypes.Array(3))]
    b = NeuralNetworkBuilder(inputs, outputs)
    b.add_convolution("left", kernel_channels=2, output_channels=3, height=1, width=1,
                      stride_height=1, stride_width=1, border_mode="valid", groups=1,
                      W=rand(1, 1, 2, 3), b=rand(3), has_bias=True, input_name="data", output_name="left_out")
    b.add_convolution("right", kernel_channels=2, output_channels=2, height=3, width=3,
                      stride_height=1, stride_width=1, border_mode="same", groups=1,
                      W=rand(3, 3, 2, 2), b=None, has_bias=False, input_name="data", output_name="right_out")
    b.add_elementwise("cat", ["left_out", "right_out"], "cat_out", "CONCAT")
    b.add_pooling("gap", height=1, width=1, stride_height=1, stride_width=1, layer_type="AVERAGE",
                  padding_type="VALID", input_name="cat_out", output_name="gap_out", is_global=True)
    b.add_flatten("flatten", mode=0, input_name="gap_out", output_name="flat")
    b.add_inner_product("fc", W=rand(3, 5), b=rand(3), input_channels=5, output_channels=3,
                        has_bias=True, input_name="flat", output_name="fc_out")
    b.add_softmax("softmax", "fc_out", "probs")
    b.make_updatable(["left", "right", "fc"])
    quiet(b.set_categorical_cross_entropy_loss, name="loss", input="probs")
    b.set_sgd_optimizer(SgdParams(lr=0.01, batch=2))
    b.set_epochs(2)
    return b


def float16_frozen():
    """A frozen layer stored as float16 in front of an updatable float32 layer."""
    inputs = [("x", datatypes.Array(4))]
    outputs = [("probs", datatypes.Array(2))]
    b = NeuralNetworkBuilder(inputs, outputs)
    b.add_inner_product("frozen", W=rand(5, 4), b=rand(5), input_channels=4, output_channels=5,
                        has_bias=True, input_name="x", output_name="h")
    b.add_activation("sig", "SIGMOID", "h", "hs")
    b.add_inner_product("head", W=rand(2, 5), b=rand(2), input_channels=5, output_channels=2,
                        has_bias=True, input_name="hs", output_name="z")
    b.add_softmax("softmax", "z", "probs")
    b.make_updatable(["head"])
    quiet(b.set_categorical_cross_entropy_loss, name="loss", input="probs")
    b.set_sgd_optimizer(SgdParams(lr=0.01, batch=2))
    b.set_epochs(1)
    # Store the frozen layer's parameters as float16, as quantize_weights(nbits=16) would.
    ip = b.spec.neuralNetwork.layers[0].innerProduct
    for w in (ip.weights, ip.bias):
        values = np.array(w.floatValue, dtype=np.float32)
        del w.floatValue[:]
        w.float16Value = values.astype("<f2").tobytes()
    return b


def quantized_weights():
    """A layer with 8-bit linearly quantized weights (rawValue + quantization): readable, not trainable."""
    inputs = [("x", datatypes.Array(4))]
    outputs = [("y", datatypes.Array(3))]
    b = NeuralNetworkBuilder(inputs, outputs)
    b.add_inner_product("quant", W=rand(3, 4), b=None, input_channels=4, output_channels=3,
                        has_bias=False, input_name="x", output_name="y")
    w = b.spec.neuralNetwork.layers[0].innerProduct.weights
    del w.floatValue[:]
    w.rawValue = bytes(range(12))
    w.quantization.numberOfBits = 8
    w.quantization.linearQuantization.scale.append(0.01)
    w.quantization.linearQuantization.bias.append(-1.0)
    return b


def unsupported_layer():
    """A local response normalization layer, which Updraft reads but cannot run."""
    inputs = [("data", datatypes.Array(4, 3, 3))]
    outputs = [("out", datatypes.Array(4, 3, 3))]
    b = NeuralNetworkBuilder(inputs, outputs)
    b.add_lrn("norm", input_name="data", output_name="out", alpha=1e-4, beta=0.75, local_size=3, k=1.0)
    return b


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "UpdraftTests", "Fixtures"))
    os.makedirs(outdir, exist_ok=True)
    save(dense_classifier("sgd"), outdir, "dense_sgd_classifier.mlmodel")
    save(dense_classifier("adam"), outdir, "dense_adam_classifier.mlmodel")
    save(mse_regressor(), outdir, "mse_regressor.mlmodel")
    save(conv_image_classifier(), outdir, "conv_image_classifier.mlmodel")
    save(concat_branches(), outdir, "concat_branches.mlmodel")
    save(float16_frozen(), outdir, "float16_frozen.mlmodel")
    save(quantized_weights(), outdir, "quantized_weights.mlmodel")
    save(unsupported_layer(), outdir, "unsupported_layer.mlmodel")
    with open(os.path.join(outdir, "expected.json"), "w") as f:
        json.dump(EXPECTED, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
