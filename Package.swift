// swift-tools-version:6.0
import PackageDescription

// Updraft: Core ML-style training of updatable models on Linux, with OpenCL kernels and a CPU path.
// Only the toolchain and distribution C libraries are used: OpenCL (ocl-icd), CLBlast, OpenBLAS, oneDNN (dlopen), libpng, libjpeg, libdeflate, Open MPI.
// Every Swift target is checked with complete strict concurrency (Swift 6's data-race rules as
// warnings in the Swift 5 language mode the sources are written in); the build has none.
let strictConcurrency: [SwiftSetting] = [.enableUpcomingFeature("StrictConcurrency")]

let package = Package(
    name: "Updraft",
    products: [
        .library(name: "Updraft", targets: ["Updraft"]),
        .executable(name: "updraft", targets: ["updraft"]),
        .executable(name: "updraft-bench", targets: ["updraft-bench"]),
    ],
    targets: [
        // C APIs, exposed as modules and nothing more.
        .systemLibrary(name: "COpenCL", path: "Sources/COpenCL", pkgConfig: "OpenCL",
                       providers: [.apt(["ocl-icd-opencl-dev", "opencl-headers"])]),
        .systemLibrary(name: "COpenBLAS", path: "Sources/COpenBLAS", pkgConfig: "openblas",
                       providers: [.apt(["libopenblas-dev"])]),
        // CLBlast: a second GEMM engine, used per shape where `updraft tune` measured it faster.
        .systemLibrary(name: "CCLBlast", path: "Sources/CCLBlast", pkgConfig: "clblast",
                       providers: [.apt(["libclblast-dev"])]),
        // Open MPI, for data-parallel training across hosts (used only when launched by mpirun).
        .systemLibrary(name: "CMPI", path: "Sources/CMPI", pkgConfig: "ompi-c",
                       providers: [.apt(["libopenmpi-dev", "openmpi-bin"])]),
        // libpng / libjpeg report errors with setjmp/longjmp, which Swift cannot catch: a small C shim does.
        // libdeflate inflates the common PNGs' data in one call (the shim's fast path; libpng does the rest).
        .target(name: "CImageIO", path: "Sources/CImageIO",
                linkerSettings: [.linkedLibrary("png"), .linkedLibrary("jpeg"), .linkedLibrary("deflate")]),
        // The CPU backend's element loops in C, each compiled for baseline x86-64, AVX2 + FMA + F16C and
        // AVX-512 (per-function target attributes), one level chosen at start-up from cpuid or forced lower
        // by UPDRAFT_CPU_LEVEL (Backends/CPU/CPUVectorLevel.swift).
        .target(name: "CUpdraftKernels", path: "Sources/CUpdraftKernels"),

        // Kernels/*.cl are compiled into the library as string constants, so executables are self-contained.
        .executableTarget(name: "embed-kernels", path: "Plugins/EmbedKernelsTool"),
        .plugin(name: "EmbedKernels", capability: .buildTool(), dependencies: ["embed-kernels"],
                path: "Plugins/EmbedKernels"),

        // oneDNN: a second CPU convolution engine, loaded with dlopen (a host without it runs the own path).
        .target(name: "CDNNL", path: "Sources/CDNNL", linkerSettings: [.linkedLibrary("dl")]),

        // The library, as targets in dependency order: each may import only the ones above it here (and
        // the C modules it names), so a reach upward does not compile. ARCHITECTURE.md section 2 lists them.
        // Names one target uses from another are `package`, not `public`: the product's API does not grow.
        // Tensor, Support, the op descriptions and their Double references, raw protobuf fields.
        // The plugin records the git revision here (Support/Version.swift).
        .target(name: "UpdraftCore", path: "Sources/UpdraftCore", swiftSettings: strictConcurrency,
                plugins: ["EmbedKernels"]),
        // The Backend protocol, the CPU and OpenCL backends, the OpCase catalogue and gradient check.
        // The plugin embeds Kernels/*.cl here. Hot loops stay inside this target.
        .target(name: "UpdraftBackends", dependencies: ["UpdraftCore", "COpenCL", "CCLBlast", "COpenBLAS", "CUpdraftKernels", "CDNNL"],
                path: "Sources/UpdraftBackends", swiftSettings: strictConcurrency, plugins: ["EmbedKernels"]),
        // The Core ML codec and typed spec, the network graph and shape inference, the optimizers'
        // descriptions. No device library: a tool that only reads and writes models links none.
        .target(name: "UpdraftModel", dependencies: ["UpdraftCore"], path: "Sources/UpdraftModel",
                swiftSettings: strictConcurrency),
        // Where the model meets the backends: the layer kinds (one type per kind), TrainingGraph, the
        // pass plan, Workspace, and the optimizers' steps.
        .target(name: "UpdraftLayers", dependencies: ["UpdraftModel", "UpdraftBackends"], path: "Sources/UpdraftLayers",
                swiftSettings: strictConcurrency),
        // Placement: compute units, devices, calibration, cost model, scheduler, the kernel tuner.
        .target(name: "UpdraftPlacement", dependencies: ["UpdraftLayers"], path: "Sources/UpdraftPlacement",
                swiftSettings: strictConcurrency),
        // What is asked of a whole model: validator, report, fuzzing.
        .target(name: "UpdraftChecks", dependencies: ["UpdraftPlacement"], path: "Sources/UpdraftChecks",
                swiftSettings: strictConcurrency),
        // Training data: image folders and labels files decoded through CImageIO, .npy arrays, batches,
        // augmentation, prefetching. Needs the model's description, not the backends' placement or checks.
        .target(name: "UpdraftData", dependencies: ["UpdraftModel", "CImageIO"],
                path: "Sources/UpdraftData", swiftSettings: strictConcurrency),
        // The executor and sessions, model kinds, data-parallel training over MPI, reporting.
        .target(name: "UpdraftTraining", dependencies: ["UpdraftChecks", "UpdraftData", "CImageIO", "CMPI"],
                path: "Sources/UpdraftTraining", swiftSettings: strictConcurrency),
        // The product: re-exports the targets above (`import Updraft` gives all of them), nothing else.
        .target(name: "Updraft",
                dependencies: ["UpdraftCore", "UpdraftBackends", "UpdraftModel", "UpdraftLayers",
                               "UpdraftPlacement", "UpdraftChecks", "UpdraftData", "UpdraftTraining"],
                path: "Sources/Updraft", swiftSettings: strictConcurrency),
        // The command-line parsing the two executables share; not part of the library's API.
        .target(name: "UpdraftCommandLine", path: "Sources/UpdraftCommandLine", swiftSettings: strictConcurrency),
        .executableTarget(name: "updraft", dependencies: ["Updraft", "UpdraftCommandLine"], path: "Sources/updraft",
                          swiftSettings: strictConcurrency),
        .executableTarget(name: "updraft-bench", dependencies: ["Updraft", "UpdraftCommandLine"],
                          path: "Benchmarks/updraft-bench", swiftSettings: strictConcurrency),
        .testTarget(name: "UpdraftTests", dependencies: ["Updraft", "UpdraftCommandLine", "CImageIO"], path: "Tests/UpdraftTests",
                    exclude: ["Fixtures"], swiftSettings: strictConcurrency),
    ],
    swiftLanguageModes: [.v5]
)
