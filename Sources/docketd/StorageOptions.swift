import ArgumentParser
import DocketServer
import Foundation

/// Where a command finds the database: `--data-dir` and `--database`, as `docketd serve` takes them (and their
/// environment variables).
struct StorageOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "Folder for the database (env DOCKET_DATA_DIR; default ./.docket).")
    var dataDirectory: String?

    @Option(help: "The database, as for docketd serve (env DOCKET_DATABASE_URL; default the SQLite file in the data folder).")
    var database: String?

    /// The configuration they name; with `mustExist`, an SQLite database that is not there is refused (a command
    /// that only reads or changes one must not create an empty one).
    func configuration(mustExist: Bool = true) throws -> Configuration {
        let environment = ProcessInfo.processInfo.environment
        var configuration = Configuration(dataDirectory: dataDirectory ?? environment["DOCKET_DATA_DIR"] ?? "./.docket")
        configuration.database = try databaseLocation(database ?? environment["DOCKET_DATABASE_URL"])
        if mustExist, case .sqlite(let path) = configuration.storageLocation, !FileManager.default.fileExists(atPath: path) {
            throw ValidationError("There is no database at \(path).")
        }
        return configuration
    }
}

/// The database a flag or variable names; nil when none is given (the data folder's SQLite file then).
func databaseLocation(_ text: String?) throws -> StorageLocation? {
    guard let text, !text.isEmpty else { return nil }
    do {
        return try StorageLocation(parsing: text)
    } catch {
        throw ValidationError(error.description)
    }
}

/// Runs `body`; a failure that is a sentence to act on (a database a newer docketd wrote, one that cannot be
/// reached, a copy that cannot be made) is printed as `Error: …` without the usage text, and exits 1.
@discardableResult
func explainingFailures<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let failure as Migrations.Refusal {
        FileHandle.standardError.write(Data("Error: \(failure.description)\n".utf8))
    } catch let failure as PostgresStorageError {
        FileHandle.standardError.write(Data("Error: \(failure.description)\n".utf8))
    } catch let failure as DatabaseCopy.Failure {
        FileHandle.standardError.write(Data("Error: \(failure.description)\n".utf8))
    } catch let failure as ClientAdministration.Failure {
        FileHandle.standardError.write(Data("Error: \(failure.description)\n".utf8))
    } catch let failure as DatabaseBackup.Failure {
        FileHandle.standardError.write(Data("Error: \(failure.description)\n".utf8))
    } catch let failure as SQLiteStorageError {
        FileHandle.standardError.write(Data("Error: \(failure.description)\n".utf8))
    }
    throw ExitCode.failure
}
