SHELL := /bin/bash
# Updraft: `make demo` and `make test` are the two entry points (see README.md).
SWIFT ?= swift
PYTHON ?= python3
UPDRAFT = .build/release/updraft
PYDEPS = .build/pydeps.stamp

.PHONY: deps build release demo test swift-test interop clean

deps:
	@bash .ci/install-deps.sh

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

demo: release
	$(UPDRAFT) devices
	$(UPDRAFT) gradcheck

# Every test: the Swift suite (OpenCL tests run on PoCL) and the coremltools interop check.
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build 2>&1 | tee .build/swift-test.log; exit $${PIPESTATUS[0]}

clean:
	rm -rf .build
