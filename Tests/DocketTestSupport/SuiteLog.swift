import DocketServer
import Foundation
import Logging
import Synchronization

/// The whole suite's logs and credentials, for `Tests/Operations/secret_scan.py` (CI): when `DOCKET_TEST_LOG` names
/// a file, every docketd the tests build logs there at trace level, as JSON lines (``configure(_:)``), and the
/// credentials the tests use are written, one a line, to that file's name with `.credentials` added
/// (``credential(_:)``). The scan then fails on any credential in any log line.
public enum SuiteLog {
    private static let files: (log: FileHandle, credentials: FileHandle)? = {
        guard let path = ProcessInfo.processInfo.environment["DOCKET_TEST_LOG"], !path.isEmpty else { return nil }
        func open(_ path: String) -> FileHandle? {
            if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
            guard let handle = FileHandle(forWritingAtPath: path) else { return nil }
            handle.seekToEndOfFile()
            return handle
        }
        guard let log = open(path), let credentials = open(path + ".credentials") else { return nil }
        return (log, credentials)
    }()
    private static let lock = Mutex(())

    /// Whether the suite's logs are being kept.
    public static var isOn: Bool { files != nil }

    /// Sends an app's log lines to the suite's log, at trace level (when the suite's logs are kept).
    public static func configure(_ configuration: inout Configuration) {
        guard let files else { return }
        configuration.logHandler = { label in
            var handler = JSONLogHandler(label: label) { bytes in lock.withLock { _ in files.log.write(Data(bytes)) } }
            handler.logLevel = .trace
            return handler
        }
        configuration.logLevel = .trace
    }

    /// Notes a credential the suite used (only long ones: a demo password such as `password` is also a word).
    public static func credential(_ value: some StringProtocol) {
        guard let files, value.count >= 10 else { return }
        lock.withLock { _ in files.credentials.write(Data((String(value) + "\n").utf8)) }
    }
}
