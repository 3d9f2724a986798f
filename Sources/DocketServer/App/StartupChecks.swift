import Foundation
import NIOCore
import NIOPosix

/// Why docketd cannot start, in a sentence a person can act on (printed as it is, without usage text).
public struct StartupFailure: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// Checks on the data folder, made before anything is written into it.
public enum DataFolder {
    /// Creates the folder when missing; throws a sentence saying why it cannot be used otherwise.
    public static func prepare(_ path: String, databaseName: String = "docket.sqlite") throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw StartupFailure("The data folder \(path) is a file, not a folder. Choose another --data-dir.")
            }
        } else {
            do {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                throw StartupFailure(
                    "The data folder \(path) cannot be created (\(error.localizedDescription)). Choose another --data-dir or create it first."
                )
            }
        }
        guard FileManager.default.isWritableFile(atPath: path) else {
            throw StartupFailure("The data folder \(path) is not writable by this user. Fix its permissions or choose another --data-dir.")
        }
        let database = URL(fileURLWithPath: path).appendingPathComponent(databaseName).path
        if FileManager.default.fileExists(atPath: database), !FileManager.default.isWritableFile(atPath: database) {
            throw StartupFailure("The database \(database) is not writable by this user. Fix its permissions.")
        }
    }
}

/// Checks that the address docketd is about to listen on is free, before anything touches the data folder.
public enum ListenAddress {
    /// Throws a sentence naming the port when it cannot be bound (in use, or not permitted).
    public static func check(host: String, port: Int) async throws {
        guard port != 0 else { return }
        do {
            // As the server itself binds: connections of an earlier run still in TIME_WAIT do not hold the port.
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .bind(host: host, port: port).get()
            try await channel.close()
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            throw StartupFailure(
                "Port \(port) on \(host) is already in use. Stop whatever listens there, choose another port with --port, or use --port 0 to take any free port."
            )
        } catch let error as IOError where error.errnoCode == EACCES {
            throw StartupFailure(
                "Port \(port) on \(host) needs privileges this user lacks. Choose a port above 1023 with --port, or --port 0."
            )
        } catch {
            throw StartupFailure("Cannot listen on \(host):\(port): \(error). Check --host and --port.")
        }
    }
}
