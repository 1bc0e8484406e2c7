#!/usr/bin/env python3
"""Checks Updraft's TensorBoard logs with TensorBoard's own reader.

Usage: python3 Tests/Scripts/check_tensorboard.py UPDRAFT_BINARY [--http] [--browser | --browser=SCREENSHOT.png]

Runs a real `updraft train --log run.jsonl --tensorboard tb` (a SqueezeNet of 10 classes on the
bundled digits, 2 epochs, on the CPU), then reads the event file:
- its framing byte by byte (each record's length and data with TensorBoard's masked CRC-32C) and
  its first record (`file_version: "brain.Event:2"`);
- with `EventAccumulator`: every scalar tag, step and value against the JSON Lines log of the same
  run (scalars are float32 in the file: compared within float32 rounding), no tag more or less;
- the weight, bias and gradient histograms of every updatable layer at every epoch, the last
  epoch's weights against the trained model read with coremltools (count, min, max, sum);
- the validation confusion matrix, a PNG image at each epoch's step;
- the hyperparameters and updatable-layers text, and the hparams plugin's session records.
Then a run killed mid-epoch and resumed from its checkpoint: each step once, as TensorBoard reads it.
With --http it also starts `tensorboard --logdir` on 127.0.0.1 and checks the same scalars,
histograms, images and hparams session through the HTTP API that TensorBoard's web page uses;
with --browser (implies --http) it opens the scalars dashboard in headless Chromium and checks the
screenshot shows the run's curve (`--browser=PATH` keeps the screenshot there); where Chromium is
not installed that step is skipped with a message.
Exits 1, naming what differs, when anything does.
"""
import json, math, os, socket, struct, subprocess, sys, tempfile, time, urllib.parse, urllib.request

import numpy as np
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
from tensorboard.plugins.hparams import metadata as hparams_metadata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)


def same_float32(a, b):
    """b (read from the file) is a (from the log, a double) rounded to float32."""
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(float(np.float32(a)) - b) <= 2 ** -23 * max(abs(b), 1e-30)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("FAIL: %s exited %d\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p.stdout


def train(updraft, work):
    model = os.path.join(work, "s.mlmodel")
    run([updraft, "create", "squeezenet", "--classes", "10", "--input-size", "48", "--out", model])
    run([updraft, "make-updatable", model, "--allowed-epochs", "1..10", "--out", model])
    digits = os.path.join(ROOT, "Tests/Data/digits/validation")
    out = run([updraft, "train", model, "--train", digits, "--validation", digits, "--epochs", "2", "--batch-size", "64",
               "--learning-rate", "0.01", "--compute-units", "cpuOnly", "--out", os.path.join(work, "t.mlmodel"),
               "--log", os.path.join(work, "run.jsonl"), "--tensorboard", os.path.join(work, "tb")])
    print(out.strip().splitlines()[-1])


def check_killed_and_resumed(updraft, work):
    """A run killed (SIGKILL) after its 6th mini-batch, its last checkpoint at step 4, resumed
    with --resume: TensorBoard reads the killed run's file, drops its steps after the checkpoint
    (the resumed file starts with a SessionLog START at step 5), and shows each step once, the
    steps from 5 on with the resumed run's logged losses."""
    model, logdir = os.path.join(work, "s.mlmodel"), os.path.join(work, "tb-resumed")
    out, first_log, second_log = (os.path.join(work, n) for n in ("k.mlmodel", "killed.jsonl", "resumed.jsonl"))
    digits = os.path.join(ROOT, "Tests/Data/digits/validation")
    p = subprocess.Popen([updraft, "train", model, "--train", digits, "--epochs", "2", "--batch-size", "64", "--compute-units", "cpuOnly",
                          "--out", out, "--checkpoint-every-batches", "4", "--log", first_log, "--tensorboard", logdir],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, UPDRAFT_PAUSE_AFTER_MINI_BATCH="6"))  # waits there to be killed
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(first_log) and sum('"miniBatchEnd"' in l for l in open(first_log)) >= 6:
            break
        time.sleep(0.05)
    p.kill()
    p.wait()
    killed = ea.EventAccumulator(logdir)
    killed.Reload()
    logged = [s.step for s in killed.Scalars("batch/loss")]
    check(logged == list(range(1, 7)), "the killed run's file reads, steps %s, expected 1...6" % logged)
    run([updraft, "train", "--resume", out, "--train", digits, "--compute-units", "cpuOnly", "--log", second_log, "--tensorboard", logdir])
    acc = ea.EventAccumulator(logdir)
    acc.Reload()
    resumed = [json.loads(l) for l in open(second_log)]
    per_epoch = next(e for e in resumed if e["event"] == "trainingBegin")["batchesPerEpoch"]
    after = {e["epoch"] * per_epoch + e["batch"] + 1: e["loss"] for e in resumed if e["event"] == "miniBatchEnd"}
    steps = [s.step for s in acc.Scalars("batch/loss")]
    check(steps == list(range(1, 2 * per_epoch + 1)), "after resuming, batch/loss steps %s" % steps)
    check(min(after) == 5, "the resumed run starts at step %d, expected 5 (the checkpoint's)" % min(after))
    for s in acc.Scalars("batch/loss"):
        if s.step in after:
            check(same_float32(after[s.step], s.value), "resumed step %d: %r in the file, %r in the log" % (s.step, s.value, after[s.step]))
    print("killed after step %d, resumed from step 4: steps 1...%d each once, 5 on from the resumed run" % (len(logged), len(steps)))


def check_framing(path):
    """Every record: length, masked CRC-32C of the length, data, masked CRC-32C of the data."""
    data = open(path, "rb").read()
    offset, records = 0, []
    while offset < len(data):
        header = data[offset:offset + 12]
        check(len(header) == 12, "a whole record header at byte %d" % offset)
        (length,), (length_crc,) = struct.unpack("<Q", header[:8]), struct.unpack("<I", header[8:12])
        check(length_crc == masked_crc32c(header[:8]), "the length CRC of the record at byte %d" % offset)
        body = data[offset + 12:offset + 12 + length]
        (body_crc,) = struct.unpack("<I", data[offset + 12 + length:offset + 16 + length])
        check(body_crc == masked_crc32c(body), "the data CRC of the record at byte %d" % offset)
        records.append(body)
        offset += 16 + length
    first = event_pb2.Event.FromString(records[0])
    check(first.file_version == "brain.Event:2", "the first record is file_version brain.Event:2, not %r" % first)
    print("framing: %d records, %d bytes, every CRC-32C right" % (len(records), len(data)))


def check_scalars(acc, log):
    begin = next(e for e in log if e["event"] == "trainingBegin")
    per_epoch = begin["batchesPerEpoch"]
    expected = {}  # tag -> [(step, value)]
    for e in log:
        if e["event"] == "miniBatchEnd":
            expected.setdefault("batch/loss", []).append((e["epoch"] * per_epoch + e["batch"] + 1, e["loss"]))
        elif e["event"] == "epochEnd":
            step = (e["epoch"] + 1) * per_epoch
            for key, tag in [("meanLoss", "train/loss"), ("trainingAccuracy", "train/accuracy"),
                             ("validationLoss", "validation/loss"), ("validationAccuracy", "validation/accuracy"),
                             ("learningRate", "learning_rate"), ("imagesPerSecond", "images_per_second")]:
                if key in e:
                    expected.setdefault(tag, []).append((step, e[key]))
    tags = set(acc.Tags()["scalars"])
    check(tags == set(expected), "scalar tags %s, expected %s" % (sorted(tags), sorted(expected)))
    points = 0
    for tag, want in expected.items():
        got = [(s.step, s.value) for s in acc.Scalars(tag)] if tag in tags else []
        check([s for s, _ in got] == [s for s, _ in want], "%s steps %s, expected %s" % (tag, [s for s, _ in got], [s for s, _ in want]))
        for (step, value), (_, logged) in zip(got, want):
            check(same_float32(logged, value), "%s at step %d: %r in the file, %r in the log" % (tag, step, value, logged))
            points += 1
    print("scalars: %d tags, %d points, each the log's value as float32" % (len(expected), points))
    return begin, per_epoch


def updatable_layers(acc):
    text = acc.Tensors("updatable_layers")[0].tensor_proto.string_val[0].decode()
    rows = [line.strip("|").split("|") for line in text.splitlines()[2:]]
    return {cells[0].strip(): int(cells[4]) for cells in rows}


def model_weights(path):
    import coremltools as ct
    spec = ct.utils.load_spec(path)
    nn = spec.neuralNetworkClassifier if spec.WhichOneof("Type") == "neuralNetworkClassifier" else spec.neuralNetwork
    found = {}
    for layer in nn.layers:
        params = getattr(layer, layer.WhichOneof("layer"))
        if hasattr(params, "weights"):
            found[layer.name] = (np.array(params.weights.floatValue, dtype=np.float32),
                                 np.array(params.bias.floatValue, dtype=np.float32) if getattr(params, "hasBias", False) else None)
    return found


def check_histograms(acc, log, per_epoch, trained):
    layers = updatable_layers(acc)
    epochs = [e["epoch"] for e in log if e["event"] == "epochEnd"]
    steps = [(epoch + 1) * per_epoch for epoch in epochs]
    weights = model_weights(trained)
    tags = set(acc.Tags()["histograms"])
    expected = {"%s/%s" % (kind, name) for name in layers for kind in ("weights", "biases", "gradients")}
    check(tags == expected, "histogram tags %s, expected %s" % (sorted(tags), sorted(expected)))
    for name, parameters in layers.items():
        w, b = weights[name]
        check(w.size + (b.size if b is not None else 0) == parameters, "%s: %d parameters in the text, %d in the model" % (name, parameters, w.size))
        for kind, values in (("weights", w), ("biases", b), ("gradients", None)):
            tag = "%s/%s" % (kind, name)
            events = acc.Histograms(tag) if tag in tags else []
            check([e.step for e in events] == steps, "%s steps %s, expected %s" % (tag, [e.step for e in events], steps))
            for e in events:
                h = e.histogram_value
                check(sum(h.bucket) == h.num, "%s at step %d: buckets hold %d of %d values" % (tag, e.step, sum(h.bucket), h.num))
                check(h.min <= h.max, "%s at step %d: min above max" % (tag, e.step))
            if events and values is not None:
                h = events[-1].histogram_value
                want = (values.size, float(values.min()), float(values.max()), float(values.astype(np.float64).sum()))
                got = (int(h.num), h.min, h.max, h.sum)
                check(got[:3] == want[:3] and abs(got[3] - want[3]) <= 1e-9 * max(1.0, np.abs(values).astype(np.float64).sum()),
                      "%s at the last epoch: (count, min, max, sum) %s, the trained model's %s" % (tag, got, want))
            elif events:
                check(events[-1].histogram_value.num == w.size, "%s counts %d values, the layer has %d weights" % (tag, events[-1].histogram_value.num, w.size))
    print("histograms: %d tags at steps %s; the last weights and biases match the trained model" % (len(expected), steps))


def check_images(acc, log, per_epoch):
    """The validation confusion matrix: a PNG at each epoch's step, of the size its summary says."""
    import io
    from PIL import Image
    steps = [(e["epoch"] + 1) * per_epoch for e in log if e["event"] == "epochEnd" and "validationAccuracy" in e]
    check(acc.Tags()["images"] == ["validation/confusion_matrix"], "image tags %s" % acc.Tags()["images"])
    images = acc.Images("validation/confusion_matrix") if acc.Tags()["images"] else []
    check([i.step for i in images] == steps, "confusion matrix steps %s, expected %s" % ([i.step for i in images], steps))
    for i in images:
        picture = Image.open(io.BytesIO(i.encoded_image_string))
        check(picture.format == "PNG" and picture.size == (i.width, i.height),
              "the confusion matrix at step %d: a %s of %s, the summary says %dx%d" % (i.step, picture.format, picture.size, i.width, i.height))
    print("images: a %dx%d confusion matrix PNG at steps %s" % (images[-1].width, images[-1].height, steps) if images else "images: none")


def check_text_and_hparams(acc, begin):
    text = acc.Tensors("hyperparameters")[0].tensor_proto.string_val[0].decode()
    rows = dict((c[0].strip(), c[1].strip()) for c in (l.strip("|").split("|") for l in text.splitlines()[2:]))
    check(rows.get("optimizer") == begin["optimizer"], "the hyperparameters text says optimizer %r" % rows.get("optimizer"))
    for key, value in begin["parameters"].items():
        shown = rows.get(key)
        ok = shown == str(value).lower() if isinstance(value, bool) else shown is not None and float(shown) == float(value)
        check(ok, "the hyperparameters text says %s = %r, the log %r" % (key, shown, value))
    start = acc.SummaryMetadata("_hparams_/session_start_info").plugin_data
    info = hparams_metadata.parse_session_start_info_plugin_data(start.content)
    got = {k: (v.bool_value if v.WhichOneof("kind") == "bool_value" else v.number_value if v.WhichOneof("kind") == "number_value" else v.string_value)
           for k, v in info.hparams.items()}
    want = dict(begin["parameters"], optimizer=begin["optimizer"])
    check(got == want, "hparams session start %s, the log %s" % (got, want))
    end = hparams_metadata.parse_session_end_info_plugin_data(acc.SummaryMetadata("_hparams_/session_end_info").plugin_data.content)
    check(end.status == 1, "hparams session end status %d, expected 1 (success)" % end.status)
    print("text and hparams: %d hyperparameters, session ended with success" % len(want))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# TensorBoard's colour for the first run (its palette starts #ff7043), as the scalars chart draws its line.
RUN_COLOUR = (0xFF, 0x70, 0x43)


def check_browser(base, screenshot):
    """The scalars dashboard in headless Chromium: the page opened with ?forceSVG=true (its WebGL
    chart stays empty in headless Chromium), given 20 s of virtual time to load and draw, saved as
    a screenshot that must show the run's curve: pixels of the run's colour inside the charts'
    pane (right of the sidebar, below the header and the tag filter), not just TensorBoard's header."""
    import shutil
    from PIL import Image
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        print("browser: skipped, Chromium is not installed (apt-get install chromium) and could not be")
        return
    width, height = 1400, 1000
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=%d,%d" % (width, height),
                    "--virtual-time-budget=20000", "--screenshot=" + screenshot, base + "/?forceSVG=true#scalars"],
                   capture_output=True, timeout=180)
    check(os.path.exists(screenshot), "Chromium saved no screenshot")
    if not os.path.exists(screenshot):
        return
    image = Image.open(screenshot).convert("RGB")
    check(image.size == (width, height), "the screenshot is %s, asked %dx%d" % (image.size, width, height))
    pixels = image.load()
    curve = sum(1 for x in range(400, image.size[0]) for y in range(180, image.size[1])
                if all(abs(pixels[x, y][i] - RUN_COLOUR[i]) <= 12 for i in range(3)))
    header = sum(1 for x in range(0, image.size[0]) for y in range(0, 60) if pixels[x, y] == (245, 124, 0))
    check(header > 10000, "the screenshot shows no TensorBoard header (%d header pixels)" % header)
    check(curve >= 100, "the screenshot's charts hold %d pixels of the run's colour, expected a curve (100 or more)" % curve)
    print("browser: %s drew the scalars dashboard, %d pixels of the run's curve in the charts (%s)"
          % (browser, curve, os.path.basename(screenshot)))


def check_http(logdir, acc, begin, screenshot=None):
    """The same scalars, histograms, images and hyperparameters through TensorBoard's HTTP API
    (what its web page reads)."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--port", str(port),
                               "--host", "127.0.0.1", "--load_fast", "false"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = "http://127.0.0.1:%d" % port
    try:
        def get(path, body=None, raw=False):
            request = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as r:
                data = r.read()
                return data if raw else json.loads(data)
        deadline, tags = time.time() + 60, {}
        while time.time() < deadline:
            try:
                tags = get("/data/plugin/scalars/tags")
                if tags.get(".", {}):
                    break
            except OSError:
                pass
            time.sleep(0.5)
        check(set(tags.get(".", {})) == set(acc.Tags()["scalars"]), "the HTTP API's scalar tags %s" % tags)
        points = 0
        for tag in acc.Tags()["scalars"]:
            got = get("/data/plugin/scalars/scalars?" + urllib.parse.urlencode({"run": ".", "tag": tag}))
            want = [(s.step, s.value) for s in acc.Scalars(tag)]
            check([(p[1], p[2]) for p in got] == want, "the HTTP API's %s: %s, the reader's %s" % (tag, got, want))
            points += len(got)
        hist_tags = get("/data/plugin/histograms/tags").get(".", {})
        check(set(hist_tags) == set(acc.Tags()["histograms"]), "the HTTP API's histogram tags %s" % sorted(hist_tags))
        for tag in hist_tags:
            got = get("/data/plugin/histograms/histograms?" + urllib.parse.urlencode({"run": ".", "tag": tag}))
            steps = [e.step for e in acc.Histograms(tag)]
            check([g[1] for g in got] == steps, "the HTTP API's %s steps %s" % (tag, [g[1] for g in got]))
            for g, e in zip(got, acc.Histograms(tag)):
                count = sum(bucket[2] for bucket in g[2])
                check(abs(count - e.histogram_value.num) < 1e-6 * e.histogram_value.num + 1e-9,
                      "the HTTP API's %s at step %d holds %r values, the file %r" % (tag, g[1], count, e.histogram_value.num))
        image_tags = get("/data/plugin/images/tags").get(".", {})
        check(set(image_tags) == set(acc.Tags()["images"]), "the HTTP API's image tags %s" % sorted(image_tags))
        for tag in image_tags:
            listed = get("/data/plugin/images/images?" + urllib.parse.urlencode({"run": ".", "tag": tag}))
            check([i["step"] for i in listed] == [i.step for i in acc.Images(tag)], "the HTTP API's %s steps" % tag)
            for item, image in zip(listed, acc.Images(tag)):
                png = get("/data/plugin/images/individualImage?" + item["query"], raw=True)
                check(png == image.encoded_image_string, "the HTTP API's %s at step %d is the file's PNG" % (tag, item["step"]))
        groups = get("/data/plugin/hparams/session_groups", {
            "experimentName": "", "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
            "colParams": [], "startIndex": 0, "sliceSize": 10})["sessionGroups"]
        check(len(groups) == 1 and groups[0]["hparams"] == dict(begin["parameters"], optimizer=begin["optimizer"]),
              "the HTTP API's hparams session groups %s" % groups)
        check(groups and groups[0]["sessions"][0]["status"] == "STATUS_SUCCESS", "the HTTP API's session status")
        metrics = {m["name"]["tag"] for m in get("/data/plugin/hparams/experiment", {"experimentName": ""})["metricInfos"]}
        check(metrics == set(acc.Tags()["scalars"]), "the hparams plugin's metrics %s" % sorted(metrics))
        print("HTTP API (tensorboard on 127.0.0.1:%d): %d scalar points, %d histogram tags, %d image tags, one hparams session "
              "with %d metrics, as the reader" % (port, points, len(hist_tags), len(image_tags), len(metrics)))
        if screenshot:
            check_browser(base, screenshot)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as work:
        train(os.path.abspath(args[0]), work)
        logdir = os.path.join(work, "tb")
        files = [f for f in os.listdir(logdir) if f.startswith("events.out.tfevents.")]
        check(len(files) == 1, "one event file in %s, found %s" % (logdir, files))
        check_framing(os.path.join(logdir, files[0]))
        log = [json.loads(line) for line in open(os.path.join(work, "run.jsonl"))]
        acc = ea.EventAccumulator(logdir, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.TENSORS: 0, ea.IMAGES: 0})
        acc.Reload()
        begin, per_epoch = check_scalars(acc, log)
        check_histograms(acc, log, per_epoch, os.path.join(work, "t.mlmodel"))
        check_images(acc, log, per_epoch)
        check_text_and_hparams(acc, begin)
        shot = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--browser=")), None)
        if "--browser" in sys.argv[1:]:
            shot = os.path.join(work, "tensorboard-scalars.png")
        if "--http" in sys.argv[1:] or shot:
            check_http(logdir, acc, begin, shot)
        check_killed_and_resumed(os.path.abspath(args[0]), work)
    if failures:
        sys.exit("%d TensorBoard check(s) failed" % len(failures))
    print("TensorBoard check passed")


if __name__ == "__main__":
    main()
