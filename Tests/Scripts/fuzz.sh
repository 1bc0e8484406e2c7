#!/usr/bin/env bash
# The long fuzz run behind `make fuzz`: the same fuzz tests `make test` runs, with far more mutations.
# Each part is one line; seeds are fixed, so a failure repeats. Run from the repository root.
set -euo pipefail
swift build --build-tests

# Decoders: mutated PNG, JPEG and .npy through the decoders, the header probe and the resampler
# (200,000 mutations of each of nine seed files; a few minutes).
UPDRAFT_FUZZ_DECODER_ITERATIONS="${UPDRAFT_FUZZ_DECODER_ITERATIONS:-200000}" \
    swift test --skip-build --filter DataDecoderFuzzTests
