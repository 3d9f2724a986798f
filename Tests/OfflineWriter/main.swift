// The client side of Tests/Offline/kill_client.py: writes records through DocketOffline and says which writes the
// store acknowledged, while keepSynced sends them; the script kills it with SIGKILL at random moments.
//
//     offline-writer INSTANCE STORE FROM COUNT        writes w-FROM … w-(FROM+COUNT-1), prints "ACK i" after each
//                                                     local write returns, then "DRAINED" once all are sent
//     offline-writer INSTANCE STORE --drain           only sends what is queued, then prints "DRAINED"
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
let syncing = Task { await store.keepSynced(interval: .seconds(5)) }
if arguments[3] != "--drain", arguments.count >= 5, let from = Int(arguments[3]), let count = Int(arguments[4]) {
    for index in from..<(from + count) {
        try await store.create(in: "incident", values: ["short_description": "w-\(index)"])
        say("ACK \(index)")
    }
}
// Until nothing waits to be sent (an operation the server refused, or in conflict, is reported, not waited for).
while true {
    let operations = try await store.operations()
    if !operations.contains(where: { $0.state == .queued || $0.state == .sending }) {
        syncing.cancel()
        for operation in operations { say("STUCK \(operation.state.rawValue) \(operation.values["short_description"] ?? ""): \(operation.lastError ?? "")") }
        break
    }
    try await Task.sleep(for: .milliseconds(20))
}
say("DRAINED")
