// The client side of Tests/Offline/kill_client.py: writes records through DocketOffline and says which writes the
// store acknowledged, while keepSynced sends them; the script kills it with SIGKILL at random moments.
//
//     offline-writer INSTANCE STORE FROM COUNT        writes w-FROM … w-(FROM+COUNT-1), prints "ACK i" after each
//                                                     local write returns, then "DRAINED" once all are sent
//     offline-writer INSTANCE STORE --drain           only sends what is queued, then prints "DRAINED"
//     offline-writer INSTANCE STORE FROM COUNT --queue-only   writes without sending, then exits
//     offline-writer INSTANCE STORE --catch-up [PREFIX]  follows incidents (first reading those whose short description
//                                                     starts with PREFIX), then times one sync after "GO" on stdin
//     offline-writer INSTANCE STORE --observe COUNT   times COUNT local edits from the call to their observation
//                                                     (p50, p99, max), without sending anything
import DocketKit
import DocketOffline
import Foundation

@MainActor func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count >= 4 else {
    FileHandle.standardError.write(Data("usage: offline-writer INSTANCE STORE (FROM COUNT | --drain)\n".utf8))
    exit(2)
}
let client = try DocketClient(instance: arguments[1], credentials: .basic(userName: "john.doe", password: "password"))
let store = try OfflineStore(path: arguments[2], client: client)
if arguments[3] == "--observe", arguments.count >= 5, let count = Int(arguments[4]) {
    let id = try await store.create(in: "incident", values: ["short_description": "observed"])
    var updates = store.observe(id, in: "incident").makeAsyncIterator()
    _ = try await updates.next()
    var times: [Double] = []
    for index in 0..<count {
        let text = "edit \(index)"
        let started = ContinuousClock.now
        try await store.update(id, in: "incident", values: ["short_description": text])
        while let record = try await updates.next(), record?.values["short_description"] != text {}
        let elapsed = ContinuousClock.now - started
        times.append(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000)
    }
    times.sort()
    func percentile(_ p: Double) -> Double { times[min(times.count - 1, Int(Double(times.count) * p))] }
    say(String(format: "observed %d local edits: p50 %.2f ms, p99 %.2f ms, max %.2f ms", count, percentile(0.5), percentile(0.99), times.last ?? 0))
    exit(0)
}
if arguments[3] == "--catch-up" {
    // Follows incidents from now; after "GO" on stdin, times one sync (the changes made meanwhile, or a resync).
    // With a prefix, the incidents whose short description starts with it are read into the store first.
    let prefix = arguments.count >= 5 ? arguments[4] : nil
    _ = try await store.refresh(
        "incident", query: prefix.map { .where("short_description", .startsWith, $0) } ?? .where("short_description", .equals, "nothing matches this"),
        limit: 50_000
    )
    say("READY")
    _ = readLine()
    let started = ContinuousClock.now
    let report = try await store.sync()
    let elapsed = ContinuousClock.now - started
    let held = try await store.records(in: "incident").count
    say(String(format: "applied %d changes%@ in %.2f s; the store holds %d incidents", report.applied,
               report.refetched ? " (a resync: every record read again)" : "",
               Double(elapsed.components.attoseconds) / 1e18 + Double(elapsed.components.seconds), held))
    exit(0)
}
let queueOnly = arguments.contains("--queue-only")
let syncing = queueOnly ? nil : Task { await store.keepSynced(interval: .seconds(5)) }
if arguments[3] != "--drain", arguments.count >= 5, let from = Int(arguments[3]), let count = Int(arguments[4]) {
    for index in from..<(from + count) {
        try await store.create(in: "incident", values: ["short_description": "w-\(index)"])
        say("ACK \(index)")
    }
}
if queueOnly { exit(0) }
// Until nothing waits to be sent (an operation the server refused, or in conflict, is reported, not waited for).
while true {
    let operations = try await store.operations()
    if !operations.contains(where: { $0.state == .queued || $0.state == .sending }) {
        syncing?.cancel()
        for operation in operations { say("STUCK \(operation.state.rawValue) \(operation.values["short_description"] ?? ""): \(operation.lastError ?? "")") }
        break
    }
    try await Task.sleep(for: .milliseconds(20))
}
say("DRAINED")
