import Dispatch

/// A value handed to other threads that the compiler cannot prove safe to share: a
/// pointer into a buffer each thread writes a disjoint part of, a closure the join outlives, a
/// result handed over through a semaphore.
/// Every use states why the sharing is safe.
package struct UncheckedSendable<Value>: @unchecked Sendable {
    package let value: Value
    package init(_ value: Value) { self.value = value }
}

/// `DispatchQueue.concurrentPerform` for a body that is not `@Sendable`: `body(i)` for every i in
/// 0..<iterations on Dispatch's pool, returning when all have run. The callers' iterations touch
/// disjoint memory (or synchronise themselves), which strict concurrency checking cannot see
/// through raw pointers; this is the one place that says so.
package func forkJoin(iterations: Int, _ body: (Int) -> Void) {
    withoutActuallyEscaping(body) { body in
        let shared = UncheckedSendable(body)
        DispatchQueue.concurrentPerform(iterations: iterations) { shared.value($0) }
    }
}
