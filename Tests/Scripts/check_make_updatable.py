#!/usr/bin/env python3
"""Checks that `updraft make-updatable` writes what coremltools' own make_updatable and set_* write.

    python3 Tests/Scripts/check_make_updatable.py UPDRAFT_BINARY

For each case: builds a model that is not updatable with coremltools' NeuralNetworkBuilder (random
weights from a fixed seed), runs `updraft make-updatable` on it, and builds the expectation from the
same model with NeuralNetworkBuilder.make_updatable, set_categorical_cross_entropy_loss /
set_mean_squared_error_loss, set_sgd_optimizer / set_adam_optimizer, set_epochs and set_shuffle (for
re-parameterized models, the fields those functions write, set directly). Then compares the two
specs loaded with coremltools.utils.load_spec field by field: version, isUpdatable, training inputs,
update parameters, every layer (flags, weights, type). Exits 1 listing every difference.
"""
import contextlib
import io
import os
import subprocess
import sys
import tempfile

import numpy as np

with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
    import coremltools  # noqa: E402
    from coremltools.models import datatypes
    from coremltools.models.neural_network import NeuralNetworkBuilder, SgdParams, AdamParams
    from google.protobuf import text_format

rng = np.random.RandomState(1107)


def rand(*shape):
    return rng.uniform(-0.5, 0.5, size=shape).astype(np.float32)


def quiet(fn, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


def copy_spec(spec):
    out = type(spec)()
    out.CopyFrom(spec)
    return out


# ---- models that are not updatable (as a converter leaves them) ----

def dense_classifier():
    b = NeuralNetworkBuilder([("features", datatypes.Array(4))], [("probs", None)], mode="classifier")
    b.add_inner_product("fc1", W=rand(6, 4), b=rand(6), input_channels=4, output_channels=6, has_bias=True,
                        input_name="features", output_name="h")
    b.add_activation("relu", "RELU", "h", "hr")
    b.add_inner_product("fc2", W=rand(3, 6), b=None, input_channels=6, output_channels=3, has_bias=False,
                        input_name="hr", output_name="logits")
    b.add_softmax("softmax", "logits", "probs")
    b.set_class_labels(["a", "b", "c"], predicted_feature_name="label", prediction_blob="probs")
    return b.spec


def conv_classifier_softmax_nd():
    """Ends in softmaxND, as coremltools' PyTorch converter writes torch.softmax(x, dim=1)."""
    b = NeuralNetworkBuilder([("image", datatypes.Array(2, 5, 5))], [("probs", None)], mode="classifier")
    b.add_convolution("conv", kernel_channels=2, output_channels=3, height=3, width=3, stride_height=1,
                      stride_width=1, border_mode="valid", groups=1, W=rand(3, 3, 2, 3), b=rand(3), has_bias=True,
                      input_name="image", output_name="c")
    b.add_flatten("flatten", mode=0, input_name="c", output_name="flat")
    b.add_inner_product("fc", W=rand(4, 27), b=rand(4), input_channels=27, output_channels=4, has_bias=True,
                        input_name="flat", output_name="logits")
    b.add_softmax_nd("softmax", "logits", "probs", axis=-1)
    b.set_class_labels([0, 1, 2, 3], predicted_feature_name="classLabel", prediction_blob="probs")
    return b.spec


def plain_softmax_nd():
    """What ct.convert(traced_model, convert_to="neuralnetwork") gives for a classifier without a
    ClassifierConfig: a plain network whose output 'probs' comes from softmaxND(axis=1)."""
    b = NeuralNetworkBuilder([("x", datatypes.Array(1, 6))], [("probs", None)], disable_rank5_shape_mapping=True)
    b.add_inner_product("linear_0", W=rand(4, 6), b=rand(4), input_channels=6, output_channels=4, has_bias=True,
                        input_name="x", output_name="logits")
    b.add_softmax_nd("317", "logits", "probs", axis=1)
    return b.spec


def regressor():
    b = NeuralNetworkBuilder([("x", datatypes.Array(3))], [("y", datatypes.Array(2))], mode="regressor")
    b.add_inner_product("hidden", W=rand(5, 3), b=rand(5), input_channels=3, output_channels=5, has_bias=True,
                        input_name="x", output_name="h")
    b.add_activation("tanh", "TANH", "h", "ht")
    b.add_inner_product("out", W=rand(2, 5), b=rand(2), input_channels=5, output_channels=2, has_bias=True,
                        input_name="ht", output_name="y")
    return b.spec


# ---- what coremltools writes ----

def expect_dense_defaults(spec):
    b = NeuralNetworkBuilder(spec=copy_spec(spec))
    b.make_updatable(["fc1", "fc2"])
    quiet(b.set_categorical_cross_entropy_loss, name="lossLayer", input="probs")
    b.set_sgd_optimizer(SgdParams())
    b.set_epochs()
    return b.spec


def expect_dense_adam(spec):
    b = NeuralNetworkBuilder(spec=copy_spec(spec))
    b.make_updatable(["fc2"])
    quiet(b.set_categorical_cross_entropy_loss, name="loss", input="probs")
    adam = AdamParams(lr=0.002, batch=8, beta1=0.8, beta2=0.99, eps=1e-7)
    adam.set_lr(0.002, 1e-5, 0.5)
    adam.set_batch(8, [4, 8, 16])
    adam.set_beta1(0.8, 0.0, 1.0)
    adam.set_beta2(0.99, 0.0, 1.0)
    adam.set_eps(1e-7, 1e-9, 1e-3)
    b.set_adam_optimizer(adam)
    b.set_epochs(5, [1, 5, 10])
    b.set_shuffle(seed=7)
    return b.spec


def expect_conv_softmax_nd(spec):
    spec = copy_spec(spec)
    # The usual hand edit before coremltools accepts a converted classifier: softmaxND -> softmax.
    last = spec.neuralNetworkClassifier.layers[-1]
    last.softmax.MergeFromString(b"")
    b = NeuralNetworkBuilder(spec=spec)
    b.make_updatable(["conv", "fc"])
    quiet(b.set_categorical_cross_entropy_loss, name="lossLayer", input="probs")
    sgd = SgdParams(lr=0.05, batch=4, momentum=0.9)
    sgd.set_lr(0.05, 0.0, 1.0)
    sgd.set_batch(4, [1, 2, 4])
    sgd.set_momentum(0.9, 0.0, 0.95)
    b.set_sgd_optimizer(sgd)
    b.set_epochs(2, [1, 2])
    return b.spec


def expect_plain_softmax_nd(spec):
    spec = copy_spec(spec)
    spec.neuralNetwork.layers[-1].softmax.MergeFromString(b"")
    b = NeuralNetworkBuilder(spec=spec)
    b.make_updatable(["linear_0"])
    quiet(b.set_categorical_cross_entropy_loss, name="lossLayer", input="probs")
    b.set_sgd_optimizer(SgdParams())
    b.set_epochs()
    return b.spec


def expect_regressor(spec):
    b = NeuralNetworkBuilder(spec=copy_spec(spec))
    b.make_updatable(["out"])
    quiet(b.set_mean_squared_error_loss, name="lossLayer", input_feature=("y", datatypes.Array(2)))
    b.set_sgd_optimizer(SgdParams(lr=0.1, batch=2))
    b.set_epochs(4)
    return b.spec


def expect_reparameterized(spec):
    """From expect_dense_defaults' model: what set_* leave after a change of epochs, learning rate
    and allowed mini-batch sizes (set directly: calling set_* twice appends to the sets)."""
    spec = copy_spec(spec)
    u = spec.neuralNetworkClassifier.updateParams
    u.epochs.defaultValue = 3
    u.epochs.range.minValue = 1
    u.epochs.range.maxValue = 1000
    sgd = u.optimizer.sgdOptimizer
    sgd.learningRate.defaultValue = 0.05
    sgd.miniBatchSize.defaultValue = 16
    del sgd.miniBatchSize.set.values[:]
    sgd.miniBatchSize.set.values.extend([8, 16, 32])
    return spec


def expect_relayered(spec):
    """From expect_dense_defaults' model: only fc2 updatable (fc1 and its weights unflagged)."""
    spec = copy_spec(spec)
    for layer in spec.neuralNetworkClassifier.layers:
        if layer.name == "fc1":
            layer.isUpdatable = False
            layer.innerProduct.weights.isUpdatable = False
            layer.innerProduct.bias.isUpdatable = False
    return spec


# ---- comparing ----

def text(message):
    return text_format.MessageToString(message, as_one_line=True)[:400]


def layer_differences(a, b):
    """Field by field: the flags and type, then each parameter field (weights: flag, then values)."""
    out = []
    if a.isUpdatable != b.isUpdatable:
        out.append(f"isUpdatable {a.isUpdatable}, coremltools {b.isUpdatable}")
    ta, tb = a.WhichOneof("layer"), b.WhichOneof("layer")
    if ta != tb:
        return out + [f"type {ta}, coremltools {tb}"]
    pa, pb = getattr(a, ta), getattr(b, tb)
    for fd in pb.DESCRIPTOR.fields:
        va, vb = getattr(pa, fd.name), getattr(pb, fd.name)
        if va == vb:
            continue
        if fd.message_type is not None and fd.message_type.name == "WeightParams":
            present_a, present_b = pa.HasField(fd.name), pb.HasField(fd.name)
            if present_a != present_b:
                out.append(f"{fd.name} {'present' if present_a else 'absent'}, coremltools {'present' if present_b else 'absent'}")
            elif va.isUpdatable != vb.isUpdatable:
                out.append(f"{fd.name}.isUpdatable {va.isUpdatable}, coremltools {vb.isUpdatable}")
            else:
                out.append(f"{fd.name} values differ")
        else:
            out.append(f"{fd.name} differs")
    for field in ("name", "input", "output", "inputTensor", "outputTensor"):
        if getattr(a, field) != getattr(b, field):
            out.append(f"{field} differs")
    return out or ["differs"]


def compare(got, want):
    problems = []
    for field in ("specificationVersion", "isUpdatable"):
        if getattr(got, field) != getattr(want, field):
            problems.append(f"{field}: updraft {getattr(got, field)}, coremltools {getattr(want, field)}")
    if got.WhichOneof("Type") != want.WhichOneof("Type"):
        return problems + [f"model type {got.WhichOneof('Type')}, coremltools {want.WhichOneof('Type')}"]
    if list(got.description.trainingInput) != list(want.description.trainingInput):
        problems.append(f"training inputs: updraft [{'; '.join(map(text, got.description.trainingInput))}], "
                        f"coremltools [{'; '.join(map(text, want.description.trainingInput))}]")
    for field in ("input", "output", "predictedFeatureName", "predictedProbabilitiesName", "metadata"):
        if getattr(got.description, field) != getattr(want.description, field):
            problems.append(f"description.{field} differs")
    kind = want.WhichOneof("Type")
    g, w = getattr(got, kind), getattr(want, kind)
    u, v = g.updateParams, w.updateParams
    for field in ("lossLayers", "optimizer", "epochs", "shuffle", "seed"):
        a, b = getattr(u, field), getattr(v, field)
        if a != b:
            problems.append(f"updateParams.{field}: updraft {{{text(a) if field != 'lossLayers' else list(map(text, a))}}}, "
                            f"coremltools {{{text(b) if field != 'lossLayers' else list(map(text, b))}}}")
    if len(g.layers) != len(w.layers):
        problems.append(f"{len(g.layers)} layers, coremltools {len(w.layers)}")
    for a, b in zip(g.layers, w.layers):
        if a != b:
            problems += [f"layer {b.name}: {p}" for p in layer_differences(a, b)]
    # Whatever is left (class labels, preprocessing, ...): the whole specs.
    if not problems and got != want:
        problems.append("the specs differ outside the fields compared above")
    return problems


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    updraft = sys.argv[1]
    failed = 0
    cases = 0
    with tempfile.TemporaryDirectory() as d:
        def path(name):
            return os.path.join(d, name + ".mlmodel")

        def run(name, source, args):
            cmd = [updraft, "make-updatable", path(source), "--out", path(name)] + args
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
            return coremltools.utils.load_spec(path(name))

        sources = {"dense": dense_classifier(), "conv_nd": conv_classifier_softmax_nd(), "regressor": regressor(),
                   "plain_nd": plain_softmax_nd()}
        for name, spec in sources.items():
            coremltools.utils.save_spec(spec, path(name))
        dense_default = expect_dense_defaults(sources["dense"])
        cases_list = [
            ("dense_defaults", "dense", ["--layers", "fc1,fc2"], lambda: dense_default),
            ("dense_adam", "dense", ["--layers", "fc2", "--loss-name", "loss", "--optimizer", "adam",
                                     "--learning-rate", "0.002", "--allowed-learning-rate", "1e-5..0.5",
                                     "--batch-size", "8", "--allowed-batch-sizes", "4,8,16",
                                     "--beta1", "0.8", "--beta2", "0.99", "--eps", "1e-7", "--allowed-eps", "1e-9..1e-3",
                                     "--epochs", "5", "--allowed-epochs", "1,5,10", "--seed", "7"],
             lambda: expect_dense_adam(sources["dense"])),
            ("conv_softmax_nd", "conv_nd", ["--layers", "conv,fc", "--learning-rate", "0.05", "--batch-size", "4",
                                            "--allowed-batch-sizes", "1,2,4", "--momentum", "0.9",
                                            "--allowed-momentum", "0..0.95", "--epochs", "2", "--allowed-epochs", "1,2"],
             lambda: expect_conv_softmax_nd(sources["conv_nd"])),
            ("plain_softmax_nd", "plain_nd", ["--layers", "linear_0"], lambda: expect_plain_softmax_nd(sources["plain_nd"])),
            ("regressor_mse", "regressor", ["--layers", "out", "--learning-rate", "0.1", "--batch-size", "2",
                                            "--epochs", "4"], lambda: expect_regressor(sources["regressor"])),
            # Re-parameterizing the updatable model written above.
            ("dense_reparameterized", "dense_defaults", ["--epochs", "3", "--allowed-epochs", "1..1000",
                                                         "--learning-rate", "0.05", "--batch-size", "16",
                                                         "--allowed-batch-sizes", "8,16,32"],
             lambda: expect_reparameterized(dense_default)),
            ("dense_relayered", "dense_defaults", ["--layers", "fc2"], lambda: expect_relayered(dense_default)),
        ]
        for name, source, args, expected in cases_list:
            cases += 1
            try:
                got = run(name, source, args)
                problems = compare(got, expected())
            except Exception as e:  # a run or a file that fails is a failure, not a crash
                problems = [f"{type(e).__name__}: {e}"]
            if problems:
                failed += 1
                print(f"FAIL make-updatable {name}")
                for p in problems:
                    print(f"  {p}")
            else:
                print(f"ok   make-updatable {name}")
    print(f"check_make_updatable: {cases - failed} of {cases} models match what coremltools writes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
