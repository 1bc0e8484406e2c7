import Foundation
import Updraft
import UpdraftCommandLine

/// `--neighbors`, shared by train, evaluate and predict: a k-NN's k.
let neighborsOption = OptionSpec("neighbors", value: "K",
                                 help: "k-NN: how many neighbours vote (default: the model's; must be one of its allowed values; train writes it into the model)")

/// `--unknown-distance`, shared by evaluate and predict.
let unknownDistanceOption = OptionSpec("unknown-distance", value: "D",
                                       help: "k-NN: answer the default label when the nearest sample is farther than D (Euclidean distance)")

/// `--neighbors` and `--unknown-distance` into the configuration; the model's kind checks them
/// (a k-NN against its allowed values; other kinds refuse them by name).
func neighborsConfiguration(_ args: ParsedArguments, into config: inout UpdateConfiguration) throws {
    config.nearestNeighbors.k = try args.int("neighbors")
    config.nearestNeighbors.unknownDistance = try args.double("unknown-distance")
}
