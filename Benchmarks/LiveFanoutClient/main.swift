// The reading side of Benchmarks/live-fanout.py for WebSockets: SUBSCRIBERS graphql-transport-ws sockets to a
// running docketd, each subscribed to incidents matching a query; then WRITES incidents created one after another
// (Basic admin:admin, through the Table API), each timed from sending its POST to its change arriving on every
// socket. Prints "p50 <ms> p99 <ms>". Reading in Swift on one event-loop thread costs a few microseconds per
// message, where a Python reader costs 15 to 40 µs: on a 2-core machine shared with the server that difference
// is most of what is measured.
//
//     live-fanout-client PORT SUBSCRIBERS WRITES
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOPosix
import Synchronization
import WSClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let arguments = CommandLine.arguments
guard arguments.count == 4, let port = Int(arguments[1]), let subscribers = Int(arguments[2]), let writes = Int(arguments[3])
else {
    FileHandle.standardError.write(Data("usage: live-fanout-client PORT SUBSCRIBERS WRITES\n".utf8))
    exit(2)
}

/// What the sockets report to: the marker of the write in flight, when it was sent, who still waits for it.
final class Round: Sendable {
    struct State {
        var marker = ""
        var sent = ContinuousClock.now
        var remaining = 0
        var latencies: [Double] = []
        var ready = 0
        var measuring = false
    }

    let state = Mutex(State())

    func received(_ text: String) {
        let now = ContinuousClock.now
        state.withLock { state in
            if text.contains("connection_ack") {
                state.ready += 1
                return
            }
            guard state.remaining > 0, !state.marker.isEmpty, text.contains(state.marker) else { return }
            state.remaining -= 1
            if state.measuring {
                let elapsed = now - state.sent
                state.latencies.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
            }
        }
    }
}

let round = Round()
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
var logger = Logger(label: "live-fanout-client")
logger.logLevel = .critical
let auth = "Basic " + Data("john.doe:password".utf8).base64EncodedString()
let document = #"subscription { incident(queryConditions: \"short_descriptionSTARTSWITHlive-bench\") { sequence change sys_id record { number { value } short_description { value } } } }"#
let messages = [
    #"{"type":"connection_init","payload":{"Authorization":"\#(auth)"}}"#,
    #"{"type":"subscribe","id":"1","payload":{"query":"\#(document)"}}"#,
]
var headers = HTTPFields()
headers[HTTPField.Name("Sec-WebSocket-Protocol")!] = "graphql-transport-ws"
let configuration = WebSocketClientConfiguration(maxFrameSize: 1 << 20, additionalHeaders: headers)

for _ in 0..<subscribers {
    Task {
        _ = try? await WebSocketClient.connect(
            url: "ws://127.0.0.1:\(port)/api/now/graphql", configuration: configuration, eventLoopGroup: group, logger: logger
        ) { inbound, outbound, _ in
            for message in messages { try await outbound.write(.text(message)) }
            for try await frame in inbound.messages(maxSize: 1 << 20) {
                if case .text(let text) = frame { round.received(text) }
            }
        }
    }
}

@MainActor func waitUntil(_ deadline: Duration, _ done: () -> Bool) async throws {
    let end = ContinuousClock.now + deadline
    while !done() {
        guard ContinuousClock.now < end else { throw CancellationError() }
        try await Task.sleep(for: .microseconds(200))
    }
}

func post(_ text: String) async throws {
    var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/api/now/table/incident")!)
    request.httpMethod = "POST"
    request.setValue("Basic " + Data("admin:admin".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    request.setValue("application/json", forHTTPHeaderField: "Accept")
    request.httpBody = try JSONSerialization.data(withJSONObject: ["short_description": text])
    _ = try await URLSession.shared.data(for: request)
}

do {
    try await waitUntil(.seconds(120)) { round.state.withLock { $0.ready } >= subscribers }
    // The subscribe message follows the acknowledgement on each socket; let the last ones start.
    try await Task.sleep(for: .seconds(1))
    for index in -1..<writes {
        let marker = "live-bench \(index) \(UUID().uuidString)"
        round.state.withLock { state in
            state.marker = marker
            state.remaining = subscribers
            state.measuring = index >= 0  // the first write warms up
            state.sent = .now
        }
        try await post(marker)
        try await waitUntil(.seconds(30)) { round.state.withLock { $0.remaining } == 0 }
    }
    let latencies = round.state.withLock { $0.latencies }.sorted()
    func percentile(_ fraction: Double) -> Double { latencies[min(latencies.count - 1, Int(fraction * Double(latencies.count)))] }
    print(String(format: "p50 %.1f p99 %.1f", percentile(0.5), percentile(0.99)))
    exit(0)
} catch {
    let (ready, remaining) = round.state.withLock { ($0.ready, $0.remaining) }
    FileHandle.standardError.write(Data("live-fanout-client: timed out (\(ready) sockets ready, \(remaining) deliveries missing)\n".utf8))
    exit(1)
}
