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

.PHONY: deps build release demo test swift-test example interop install dist dist-check fuzz clean

deps:
	@bash .ci/install-deps.sh

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build $(RELEASE_FLAGS)

# updraft and updraft-bench into $(PREFIX)/bin (DESTDIR for staged installs). They need the
# distribution's OpenCL loader, OpenBLAS, libpng and libjpeg at run time, which `make deps` installs.
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

# The main job on bundled data: create SqueezeNet 1.1, fine-tune conv10 + fullyconnected0 on the
# 8x8 handwritten digits scikit-learn ships (PNG class folders in Tests/Data/digits), validate on the
# held-out split after every epoch, write the trained model, its history and a JSON Lines log.
DEMO_DIR = demo-output
DEMO_TRAIN_FLAGS ?= --epochs 10 --batch-size 32 --learning-rate 0.05 --momentum 0.9
demo: release
	$(UPDRAFT) devices
	@mkdir -p $(DEMO_DIR)
	$(UPDRAFT) create squeezenet --classes 10 --seed 1 --out $(DEMO_DIR)/squeezenet.mlmodel
	$(UPDRAFT) train $(DEMO_DIR)/squeezenet.mlmodel \
	  --train Tests/Data/digits/train --validation Tests/Data/digits/validation $(DEMO_TRAIN_FLAGS) \
	  --out $(DEMO_DIR)/squeezenet-digits.mlmodel --log $(DEMO_DIR)/train.jsonl
	$(UPDRAFT) evaluate $(DEMO_DIR)/squeezenet-digits.mlmodel --data Tests/Data/digits/validation
	$(UPDRAFT) plot $(DEMO_DIR)/squeezenet-digits.history.json --out $(DEMO_DIR)/curves.png
	@echo "demo: the trained model, its history, the event log and the loss/accuracy curves (curves.png) are in $(DEMO_DIR)/"

# Every test: the Swift suite (OpenCL tests run on PoCL), then the coremltools interop check.
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build 2>&1 | tee .build/swift-test.log; exit $${PIPESTATUS[0]}
	$(MAKE) --no-print-directory example
	$(MAKE) --no-print-directory interop
	$(MAKE) --no-print-directory dist-check

# The README's Swift example as an app's own package (Swift 6 mode, Updraft by path), built and run
# on a few bundled digits: it must train on the CPU fast path, and on OpenCL when asked, with a falling loss.
example: deps
	$(SWIFT) build --product updraft
	SWIFT=$(SWIFT) bash Examples/FineTune/check.sh "$$($(SWIFT) build --show-bin-path)/updraft"

# Models Updraft writes must read back in coremltools (the reference protobuf reader) as Updraft
# meant them: a new SqueezeNet, fixtures and SqueezeNet after new weights were set through
# CoreMLModel (`updraft reinit`), and a SqueezeNet after `updraft train`, each compared with the
# JSON sidecar Updraft writes. Then `updraft make-updatable` against coremltools' own make_updatable
# and set_* on the same models (Tests/Scripts/check_make_updatable.py), field by field.
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
	  $(PYTHON) Tests/Scripts/check_interop.py "$$dir"; \
	  $(PYTHON) Tests/Scripts/check_make_updatable.py "$$bin"

# Long fuzzing (issue 13): 100,000 mutated models through the reader, validator and planner, each
# chunk in a child process with a memory limit and a timeout; prints how long it took.
fuzz: deps
	bash Tests/Scripts/fuzz.sh

clean:
	rm -rf .build
