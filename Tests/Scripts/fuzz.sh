#!/usr/bin/env bash
# `make fuzz`: the long fuzz runs of issue 13. Each runs in a child process under a virtual-memory
# limit (an allocation over FUZZ_MEMORY_KIB fails and ends the process) and a timeout (a hang),
# in chunks so that a failure names a small range of model indices to reproduce with
#   updraft-bench fuzz --start I --models N --seed S --save DIR
# Other fuzzers add their line at the end (see "decoders" below).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODELS=${FUZZ_MODELS:-100000}
CHUNK=${FUZZ_CHUNK:-10000}
SEED=${FUZZ_SEED:-1}
MEMORY_KIB=${FUZZ_MEMORY_KIB:-1048576}   # 1 GiB of address space
TIMEOUT=${FUZZ_CHUNK_TIMEOUT:-900}
SWIFT=${SWIFT:-swift}

$SWIFT build -c release --product updraft-bench
BIN="$($SWIFT build -c release --show-bin-path)/updraft-bench"

# Runs "$@" with the memory limit and the timeout; prints what ended it when it fails.
run_limited() {
    local status=0
    ( ulimit -v "$MEMORY_KIB"; exec timeout "$TIMEOUT" "$@" ) || status=$?
    if [ "$status" -eq 124 ]; then echo "fuzz: HANG (over ${TIMEOUT}s): $*" >&2
    elif [ "$status" -gt 128 ]; then echo "fuzz: CRASH (signal $((status - 128))): $*" >&2
    elif [ "$status" -ne 0 ]; then echo "fuzz: FAILED (status $status): $*" >&2; fi
    return "$status"
}

# The same without the memory limit (the test runner itself reserves more address space).
run_limited_nomem() {
    local status=0
    timeout "$TIMEOUT" "$@" || status=$?
    if [ "$status" -eq 124 ]; then echo "fuzz: HANG (over ${TIMEOUT}s): $*" >&2
    elif [ "$status" -ne 0 ]; then echo "fuzz: FAILED (status $status): $*" >&2; fi
    return "$status"
}

start_time=$(date +%s)
failed=0
# Models: mutated .mlmodel files through the reader, the validator and the planner.
for ((start = 0; start < MODELS; start += CHUNK)); do
    n=$(( MODELS - start < CHUNK ? MODELS - start : CHUNK ))
    run_limited "$BIN" fuzz --start "$start" --models "$n" --seed "$SEED" || failed=1
done
echo "fuzz: $MODELS mutated models in $(( $(date +%s) - start_time )) s"

# Decoders: mutated PNG, JPEG and .npy through the decoders, the header probe and the resampler
# (200,000 mutations of each of nine seed files; a few minutes): the same fuzz test `make test` runs.
$SWIFT build --build-tests
decoders_start=$(date +%s)
UPDRAFT_FUZZ_DECODER_ITERATIONS="${UPDRAFT_FUZZ_DECODER_ITERATIONS:-200000}" \
    run_limited_nomem $SWIFT test --skip-build --filter DataDecoderFuzzTests || failed=1
echo "fuzz: decoders in $(( $(date +%s) - decoders_start )) s"

exit "$failed"
