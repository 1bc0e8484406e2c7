SHELL := /bin/bash
# Updraft: `make demo` and `make test` are the two entry points (see README.md).
SWIFT ?= swift
PYTHON ?= python3
UPDRAFT = .build/release/updraft
PYDEPS = .build/pydeps.stamp
# Release executables carry Swift's standard library and Foundation, so they run where Swift is not
# installed (`make install`, `make dist`).
RELEASE_FLAGS = -c release --static-swift-stdlib
PREFIX ?= /usr/local
DIST_DIR = .build/dist

.PHONY: deps build release demo test swift-test layers-check example interop tensorboard-check install dist dist-check fuzz soak clean

deps:
	@bash .ci/install-deps.sh

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build $(RELEASE_FLAGS)

# updraft and updraft-bench into $(PREFIX)/bin (DESTDIR for staged installs). They need the
# distribution's OpenCL loader, OpenBLAS, libpng, libjpeg and libdeflate at run time, which `make deps` installs.
install: release
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 755 .build/release/updraft .build/release/updraft-bench "$(DESTDIR)$(PREFIX)/bin/"
	@echo "installed updraft and updraft-bench in $(DESTDIR)$(PREFIX)/bin"

# A tarball for Linux hosts without Swift: the executables, the shared libraries a bare host may lack,
# and launchers that register a vendor OpenCL driver the host's ICD list misses (see .ci/dist.sh).
# Also leaves .device/ for the GPU host's check script (Benchmarks/gpu-check.sh).
dist: release
	bash .ci/dist.sh .build/release $(DIST_DIR)

# The tarball runs with a bare environment: no toolchain library, a training epoch (run by `make test`).
dist-check: dist
	bash .ci/dist-check.sh $$(ls -t $(DIST_DIR)/updraft-*.tar.xz | head -1)

# The main job on bundled data, in the two stages fine-tuning is for, on the 8x8 handwritten digits
# scikit-learn ships (PNG class folders in Tests/Data/digits, 64x64 input):
# 1. pretrain: a fresh SqueezeNet 1.1 with EVERY layer updatable learns digits 0-5 (back-propagating
#    through the fire modules' concats, which Core ML cannot), with random resized crops;
# 2. fine-tune: a SqueezeNet for digits 6-9 takes stage 1's trained layers frozen (--frozen-from) and
#    trains only conv10 + fullyconnected0, on cached features.
# Each stage validates on held-out digits after every epoch and is evaluated at its end; the trained
# models, histories, JSON Lines logs and loss/accuracy curves (PNG) go to demo-output/.
DEMO_DIR = demo-output
DEMO_DIGITS = Tests/Data/digits
DEMO_PRETRAIN_FLAGS ?= --epochs 10 --batch-size 16 --learning-rate 0.002 --momentum 0.9 --random-resized-crop 0.6,1
DEMO_FINETUNE_FLAGS ?= --epochs 50 --batch-size 16 --learning-rate 0.01 --momentum 0.9
DEMO_KNN_SHOTS ?= 5
DEMO_KNN_FLAGS ?= --layer pool5 --l2-normalize --neighbors 1
demo: release
	$(UPDRAFT) devices
	@rm -rf $(DEMO_DIR)/data && for split in train validation; do \
	  mkdir -p $(DEMO_DIR)/data/pretrain/$$split $(DEMO_DIR)/data/finetune/$$split; \
	  for c in 0 1 2 3 4 5; do cp -r $(DEMO_DIGITS)/$$split/$$c $(DEMO_DIR)/data/pretrain/$$split/; done; \
	  for c in 6 7 8 9; do cp -r $(DEMO_DIGITS)/$$split/$$c $(DEMO_DIR)/data/finetune/$$split/; done; \
	done
	@echo "== stage 1: train the whole SqueezeNet on digits 0-5"
	$(UPDRAFT) create squeezenet --labels 0,1,2,3,4,5 --updatable all --input-size 64 --seed 1 \
	  --out $(DEMO_DIR)/pretrain.mlmodel | head -1
	$(UPDRAFT) train $(DEMO_DIR)/pretrain.mlmodel --train $(DEMO_DIR)/data/pretrain/train \
	  --validation $(DEMO_DIR)/data/pretrain/validation $(DEMO_PRETRAIN_FLAGS) \
	  --out $(DEMO_DIR)/pretrained.mlmodel --log $(DEMO_DIR)/pretrain.jsonl
	$(UPDRAFT) plot $(DEMO_DIR)/pretrained.history.json --out $(DEMO_DIR)/pretrain-curves.png
	@echo "== stage 2: fine-tune conv10 + fullyconnected0 on digits 6-9, every other layer frozen from stage 1"
	$(UPDRAFT) create squeezenet --labels 6,7,8,9 --input-size 64 --seed 2 --frozen-from $(DEMO_DIR)/pretrained.mlmodel \
	  --out $(DEMO_DIR)/finetune.mlmodel
	$(UPDRAFT) train $(DEMO_DIR)/finetune.mlmodel --train $(DEMO_DIR)/data/finetune/train \
	  --validation $(DEMO_DIR)/data/finetune/validation $(DEMO_FINETUNE_FLAGS) \
	  --out $(DEMO_DIR)/finetuned.mlmodel --log $(DEMO_DIR)/finetune.jsonl
	$(UPDRAFT) plot $(DEMO_DIR)/finetuned.history.json --out $(DEMO_DIR)/curves.png
	@echo "== stage 3: a k-NN on stage 1's embedding, personalised from $(DEMO_KNN_SHOTS) examples of each of digits 6-9"
	@rm -rf $(DEMO_DIR)/data/fewshot && for c in 6 7 8 9; do mkdir -p $(DEMO_DIR)/data/fewshot/$$c; \
	  ls $(DEMO_DIGITS)/train/$$c | head -$(DEMO_KNN_SHOTS) | while read f; do cp $(DEMO_DIGITS)/train/$$c/$$f $(DEMO_DIR)/data/fewshot/$$c/; done; done
	$(UPDRAFT) create knn --feature-extractor $(DEMO_DIR)/pretrained.mlmodel $(DEMO_KNN_FLAGS) --out $(DEMO_DIR)/knn.mlmodel
	$(UPDRAFT) train $(DEMO_DIR)/knn.mlmodel --train $(DEMO_DIR)/data/fewshot --out $(DEMO_DIR)/knn-personalised.mlmodel
	@echo "== validation accuracy"
	@printf "stage 1, every layer trained, digits 0-5:                 "; \
	  $(UPDRAFT) evaluate $(DEMO_DIR)/pretrained.mlmodel --data $(DEMO_DIR)/data/pretrain/validation | grep -i "accuracy"
	@printf "stage 2, conv10 + fullyconnected0 fine-tuned, digits 6-9: "; \
	  $(UPDRAFT) evaluate $(DEMO_DIR)/finetuned.mlmodel --data $(DEMO_DIR)/data/finetune/validation | grep -i "accuracy"
	@printf "stage 3, k-NN from $(DEMO_KNN_SHOTS) examples per class, digits 6-9:      "; \
	  $(UPDRAFT) evaluate $(DEMO_DIR)/knn-personalised.mlmodel --data $(DEMO_DIR)/data/finetune/validation | grep -i "accuracy"
	@echo "demo: the three stages' models, histories, event logs and curves (pretrain-curves.png, curves.png) are in $(DEMO_DIR)/"

# The CPU backend's comparisons with the reference, run a second time at the baseline vector level
# (the suite itself runs at the best level this CPU has; CUpdraftKernels, UPDRAFT_CPU_LEVEL, which
# caps oneDNN's code too): every engine (own loops, direct, Winograd, oneDNN), fused residuals, the chunked prefix.
BASELINE_LEVEL_TESTS = CPUBackendTests|CPUOneDNNTests|CPUOneDNNOpsTests|CPUDirectConvolutionTests|CPUWinogradTests|CPUWinogradBoundsTests|ConvolutionResidualTests|ResidualFusionTests|BackendConvolutionSliceTests|BackendRowsTests|ExecutorChunkingTests|BackendComparisonTests|GradientCheckTests|CPUVectorLevelTests|BackendHalfRowsTests|BackendHalfStorageTests|BackendPixelUploadTests|BackendGroupedConvolutionTests|ActivationTableTests
# Every test: the Swift suite (OpenCL tests run on PoCL), then the coremltools interop check.
# The suite keeps its device profiles and tunings in a cache of its own (TEST_CACHE), so what
# `updraft tune` stored for this user's runs never changes which engine a test exercises.
TEST_CACHE = $(CURDIR)/.build/test-cache
test: deps
	$(MAKE) --no-print-directory layers-check
	$(SWIFT) build --build-tests
	UPDRAFT_CACHE_DIR=$(TEST_CACHE) $(SWIFT) test --skip-build 2>&1 | tee .build/swift-test.log; exit $${PIPESTATUS[0]}
	UPDRAFT_CACHE_DIR=$(TEST_CACHE) UPDRAFT_CPU_LEVEL=baseline $(SWIFT) test --skip-build --filter '$(BASELINE_LEVEL_TESTS)'
	$(MAKE) --no-print-directory example
	$(MAKE) --no-print-directory interop
	$(MAKE) --no-print-directory tensorboard-check
	$(MAKE) --no-print-directory dist-check

# The library's folders by SwiftPM target, lowest first (';' between targets, ',' within one; ARCHITECTURE.md).
# The compiler already refuses an import of a later target; this also names the folder and the names
# that would reach upward, and fails on a folder left out of every tier.
LAYER_TIERS = UpdraftCore/Tensor,UpdraftCore/Support,UpdraftCore/Ops,UpdraftCore/Ops/Reference,UpdraftCore/CoreML/Protobuf;UpdraftModel/CoreML/Spec,UpdraftModel/CoreML,UpdraftModel/Graph,UpdraftModel/Optimizers;UpdraftData;UpdraftBackends/Backends,UpdraftBackends/Backends/CPU,UpdraftBackends/Backends/Reference,UpdraftBackends/Ops/Verification,UpdraftBackends/Backends/OpenCL;UpdraftLayers/Layers,UpdraftLayers/Optimizers;UpdraftPlacement/Scheduling;UpdraftChecks/ModelChecks;UpdraftTraining/Training,UpdraftTraining/Executor,UpdraftTraining/ModelKinds,UpdraftTraining/Distributed,UpdraftTraining/Reporting;Updraft
layers-check:
	$(PYTHON) Tests/Scripts/folder_reach.py --check Sources "$(LAYER_TIERS)"
	$(PYTHON) Tests/Scripts/architecture_counts.py ARCHITECTURE.md

# The README's Swift example as an app's own package (Swift 6 mode, Updraft by path), built and run
# on a few bundled digits: it must train on the CPU fast path, and on OpenCL when asked, with a falling loss.
example: deps
	$(SWIFT) build --product updraft
	SWIFT=$(SWIFT) bash Examples/FineTune/check.sh "$$($(SWIFT) build --show-bin-path)/updraft"

# Models Updraft writes must read back in coremltools (the reference protobuf reader) as Updraft
# meant them: a new SqueezeNet, fixtures and SqueezeNet after new weights were set through
# CoreMLModel (`updraft reinit`), a SqueezeNet after `updraft train`, and k-NNs after `updraft train`
# (samples appended, k set) and `updraft knn` (imported, a label removed, deduped, capped), each compared with the
# JSON sidecar Updraft writes. Then `updraft make-updatable` against coremltools' own make_updatable
# and set_* on the same models (Tests/Scripts/check_make_updatable.py), field by field, and GLM classifiers
# after `updraft train` against scikit-learn's SGD trajectory (Tests/Scripts/check_glm_interop.py).
INTEROP_FIXTURES = dense_sgd_classifier dense_adam_classifier mse_regressor conv_image_classifier concat_branches float16_frozen
interop: deps
	@$(PYTHON) -c "import coremltools" >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --disable-pip-version-check coremltools
	$(SWIFT) build --product updraft
	@set -e; bin="$$($(SWIFT) build --show-bin-path)/updraft"; dir="$$(mktemp -d)"; trap 'rm -rf "$$dir"' EXIT; \
	  "$$bin" create squeezenet --classes 5 --seed 7 --out "$$dir/squeezenet.mlmodel" --sidecar "$$dir/squeezenet.json"; \
	  "$$bin" reinit "$$dir/squeezenet.mlmodel" --layers fullyconnected0,fire9/expand3x3 --seed 11 \
	    --out "$$dir/squeezenet_reinit.mlmodel" --sidecar "$$dir/squeezenet_reinit.json"; \
	  for f in $(INTEROP_FIXTURES); do \
	    "$$bin" reinit "Tests/UpdraftTests/Fixtures/$$f.mlmodel" --seed 3 --out "$$dir/$$f.mlmodel" --sidecar "$$dir/$$f.json"; \
	  done; \
	  "$$bin" create squeezenet --classes 10 --input-size 64 --seed 5 --out "$$dir/small.mlmodel"; \
	  "$$bin" train "$$dir/small.mlmodel" --train Tests/Data/digits/validation --epochs 1 --batch-size 64 \
	    --compute-units cpuOnly --out "$$dir/squeezenet_trained.mlmodel" --sidecar "$$dir/squeezenet_trained.json"; \
	  rm "$$dir/small.mlmodel"; \
	  "$$bin" make-updatable Tests/UpdraftTests/Fixtures/dense_sgd_classifier.mlmodel --layers dense2 --optimizer adam \
	    --allowed-epochs 1..100 --out "$$dir/dense_made_updatable.mlmodel" --sidecar "$$dir/dense_made_updatable.json"; \
	  "$$bin" train Tests/UpdraftTests/Fixtures/knn/update_strings.mlmodel --train Tests/UpdraftTests/Fixtures/knn/update_strings_train \
	    --neighbors 7 --out "$$dir/knn_updated.mlmodel" --sidecar "$$dir/knn_updated.json"; \
	  "$$bin" train Tests/UpdraftTests/Fixtures/knn/update_int64.mlmodel --train Tests/UpdraftTests/Fixtures/knn/update_int64_train \
	    --out "$$dir/knn_int64_updated.mlmodel" --sidecar "$$dir/knn_int64_updated.json"; \
	  "$$bin" knn "$$dir/knn_updated.mlmodel" --import Tests/UpdraftTests/Fixtures/knn/update_strings_train --remove-label bee --dedupe \
	    --max-per-label 6 --seed 3 --neighbors 3 --out "$$dir/knn_edited.mlmodel" --sidecar "$$dir/knn_edited.json"; \
	  "$$bin" knn Tests/UpdraftTests/Fixtures/knn/knn_int64_kdtree.mlmodel --neighbors 5 --out "$$dir/knn_kdtree_k5.mlmodel" \
	    --sidecar "$$dir/knn_kdtree_k5.json"; \
	  $(PYTHON) Tests/Scripts/check_interop.py "$$dir"; \
	  $(PYTHON) Tests/Scripts/check_make_updatable.py "$$bin"; \
	  $(PYTHON) Tests/Scripts/check_pipeline_interop.py "$$bin"; \
	  $(PYTHON) Tests/Scripts/check_glm_interop.py "$$bin"; \
	  "$$bin" create squeezenet --classes 10 --input-size 64 --seed 9 --out "$$dir/ck.mlmodel" > /dev/null; \
	  "$$bin" train "$$dir/ck.mlmodel" --train Tests/Data/digits/validation --epochs 10 --batch-size 16 --compute-units cpuOnly \
	    --checkpoint-every-batches 2 --out "$$dir/checkpoint.mlmodel" > /dev/null 2>&1 & pid=$$!; \
	  for i in $$(seq 1 900); do [ -f "$$dir/checkpoint.resume" ] && break; sleep 0.1; done; sleep 0.5; kill -9 $$pid 2>/dev/null || true; wait $$pid 2>/dev/null || true; \
	  $(PYTHON) Tests/Scripts/check_checkpoint_interop.py "$$dir/ck.mlmodel" "$$dir/checkpoint.mlmodel"

# A real `train --tensorboard` run read back by TensorBoard's own reader (EventAccumulator), its
# HTTP API on 127.0.0.1 and headless Chromium, checked against the run's JSON Lines log and the
# trained model (coremltools). Chromium comes from the distribution; where it cannot be installed
# the browser step is skipped with a message.
tensorboard-check: deps
	@$(PYTHON) -c "import tensorboard, coremltools, PIL" >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --disable-pip-version-check tensorboard coremltools pillow
	@command -v chromium >/dev/null || { s=""; [ "$$(id -u)" -eq 0 ] || s="sudo -n"; \
	  DEBIAN_FRONTEND=noninteractive $$s apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 \
	  || echo "Chromium could not be installed: the TensorBoard browser check will be skipped"; }
	$(SWIFT) build --product updraft
	$(PYTHON) Tests/Scripts/check_tensorboard.py "$$($(SWIFT) build --show-bin-path)/updraft" --browser

# Long fuzzing (issue 13): 100,000 mutated models through the reader, validator and planner, each
# chunk in a child process with a memory limit and a timeout; prints how long it took.
fuzz: deps
	bash Tests/Scripts/fuzz.sh

# The soak (issue 26, not part of `make test`): 1,000 update tasks in one process, 8 at a time, of varied
# kinds and hyperparameters, some cancelled, bad inputs mixed in, plus `updraft train` runs killed with
# SIGKILL at random moments and resumed. Fails on any crash, lost or corrupt model, resume differing from
# the uninterrupted run, or resident memory growing more than 0.1 MiB per task over the last 900.
# Prints a table; the same report as JSON goes to .build/soak.json.
SOAK_FLAGS ?= --tasks 1000 --concurrent 8 --kills 20 --seed 1
soak: release
	.build/release/updraft-bench soak $(SOAK_FLAGS) --json-out .build/soak.json

clean:
	rm -rf .build
