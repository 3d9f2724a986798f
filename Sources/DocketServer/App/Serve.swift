import Foundation
import Hummingbird
import Logging
import ServiceLifecycle

/// Runs the application until SIGTERM or SIGINT, and then stops it in a bounded time.
///
/// A graceful stop closes the listeners, lets requests in flight finish and ends live streams, then stops the
/// notifier and closes the database. After `gracefulLimit` what is still running is cancelled; should even that not
/// end the process within `exitLimit` of the signal (a dependency that no longer answers), the process says so and
/// exits with status 1, as a service manager would have killed it anyway — never a stop that hangs.
public func serveUntilSignalled(
    _ app: some ApplicationProtocol, gracefulLimit: Duration = .seconds(15), exitLimit: Duration = .seconds(25),
    logger: Logger
) async throws {
    var configuration = ServiceGroupConfiguration(
        services: [.init(service: app), .init(service: ShutdownWatchdog(limit: exitLimit, logger: logger))],
        gracefulShutdownSignals: [.sigterm, .sigint],
        logger: logger
    )
    configuration.maximumGracefulShutdownDuration = gracefulLimit
    try await ServiceGroup(configuration: configuration).run()
}

/// Last in the group, so the first to hear of a stop: from then on the process has `limit` to end by itself.
struct ShutdownWatchdog: Service {
    let limit: Duration
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        let (limit, logger) = (limit, logger)
        // A thread of its own, so that nothing the stop waits on can hold it up.
        let thread = Thread {
            Thread.sleep(forTimeInterval: Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18)
            logger.error("docketd did not stop within \(limit) of the signal; exiting now")
            exit(1)
        }
        thread.start()
    }
}
