// swift-tools-version:6.0
import PackageDescription

// Updraft: Core ML-style training of updatable models on Linux, with OpenCL kernels and a CPU path.
// Only the toolchain and distribution C libraries are used: OpenCL (ocl-icd), CLBlast, OpenBLAS, libpng, libjpeg, libdeflate, Open MPI.
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

        // Kernels/*.cl are compiled into the library as string constants, so executables are self-contained.
        .executableTarget(name: "embed-kernels", path: "Plugins/EmbedKernelsTool"),
        .plugin(name: "EmbedKernels", capability: .buildTool(), dependencies: ["embed-kernels"],
                path: "Plugins/EmbedKernels"),

        .target(name: "Updraft", dependencies: ["COpenCL", "CCLBlast", "COpenBLAS", "CImageIO", "CMPI"],
                path: "Sources/Updraft", swiftSettings: strictConcurrency,
                plugins: ["EmbedKernels"]),
        // The command-line parsing the two executables share; not part of the library's API.
        .target(name: "UpdraftCommandLine", path: "Sources/UpdraftCommandLine", swiftSettings: strictConcurrency),
        .executableTarget(name: "updraft", dependencies: ["Updraft", "UpdraftCommandLine"], path: "Sources/updraft",
                          swiftSettings: strictConcurrency),
        .executableTarget(name: "updraft-bench", dependencies: ["Updraft", "UpdraftCommandLine"],
                          path: "Benchmarks/updraft-bench", swiftSettings: strictConcurrency),
        .testTarget(name: "UpdraftTests", dependencies: ["Updraft", "UpdraftCommandLine"], path: "Tests/UpdraftTests",
                    exclude: ["Fixtures"], swiftSettings: strictConcurrency),
    ],
    swiftLanguageModes: [.v5]
)
