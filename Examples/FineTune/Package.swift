// swift-tools-version:6.0
import PackageDescription

// The README's "From Swift" example as an app developer's own package would hold it: Swift 6
// language mode (complete data-race checking), depending on Updraft by path. `make test` builds and
// runs it (Examples/FineTune/check.sh).
let package = Package(
    name: "FineTune",
    dependencies: [.package(name: "Updraft", path: "../..")],
    targets: [
        .executableTarget(name: "FineTune", dependencies: [.product(name: "Updraft", package: "Updraft")]),
    ]
)
