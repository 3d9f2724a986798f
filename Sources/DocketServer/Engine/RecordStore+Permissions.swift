import DocketModel

extension RecordStore {
    /// Whether any access rule lets `caller` create records in a table (the rules' row conditions apply later, to
    /// the record written).
    func mayCreate(in tableName: String, caller: Caller) -> Bool {
        guard let table = catalog.table(tableName) else { return false }
        return caller.isAdmin || !policy.rules(for: .create, on: table, caller: caller).isEmpty
    }

    /// Whether any access rule lets `caller` read records of a table (which ones, the rules' conditions decide).
    func mayRead(in tableName: String, caller: Caller) -> Bool {
        guard let table = catalog.table(tableName) else { return false }
        return caller.isAdmin || !policy.rules(for: .read, on: table, caller: caller).isEmpty
    }

    /// What `caller` may do to a record they can read: change it, delete it. Throws not found when they cannot
    /// read it.
    func permissions(_ sysID: String, in tableName: String, caller: Caller) async throws -> (write: Bool, delete: Bool) {
        let (_, record) = try await get(sysID, in: tableName, fields: ["sys_id", "sys_class_name"], caller: caller)
        let table = try catalog.table(record.table) ?? self.table(tableName)
        return try await storage.read { db in
            func allowed(_ operation: AccessOperation) async throws -> Bool {
                do {
                    try await self.checkAccess(operation, on: table, sysID: sysID, fields: [], caller: caller, db: db)
                    return true
                } catch let error as EngineError where error.code == .forbidden {
                    return false
                }
            }
            return (try await allowed(.write), try await allowed(.delete))
        }
    }
}
