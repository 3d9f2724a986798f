import DocketModel
import Foundation
import Testing

@Suite("Glide date-times and sys_ids")
struct ValuesTests {
    @Test("dates format and parse as UTC YYYY-MM-DD HH:MM:SS")
    func dateTimes() {
        #expect(GlideDateTime.format(Date(timeIntervalSince1970: 0)) == "1970-01-01 00:00:00")
        #expect(GlideDateTime.format(Date(timeIntervalSince1970: 1_709_301_600)) == "2024-03-01 14:00:00")
        #expect(GlideDateTime.parse("2024-03-01 14:00:00") == Date(timeIntervalSince1970: 1_709_301_600))
        #expect(GlideDateTime.normalize("2024-03-01T14:00:00Z") == "2024-03-01 14:00:00")
        #expect(GlideDateTime.normalize("2024-03-01") == "2024-03-01 00:00:00")
        #expect(GlideDateTime.normalize("2024-02-29 00:00:00") == "2024-02-29 00:00:00")
    }

    @Test("impossible or malformed dates are rejected", arguments: ["2023-02-29", "2024-13-01", "2024-01-01 24:00:00", "yesterday", "2024-1-1", ""])
    func badDates(text: String) {
        #expect(GlideDateTime.parse(text) == nil)
    }

    @Test("generated sys_ids are 32 lowercase hex characters and unique")
    func sysIDs() {
        let ids = (0..<1000).map { _ in SysID.generate() }
        #expect(Set(ids).count == 1000)
        #expect(ids.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) && $0 == $0.lowercased() })
    }

    @Test("stable sys_ids are deterministic and well spread")
    func stableIDs() {
        #expect(SysID.stable("incident-1") == SysID.stable("incident-1"))
        let a = SysID.stable("demo.incident.1")
        let b = SysID.stable("demo.incident.2")
        #expect(a != b)
        #expect(a.prefix(6) != b.prefix(6))
    }

    @Test("sys_id validation accepts opaque short ids and rejects SQL and long strings")
    func validation() {
        #expect(SysID.isValid("global"))
        #expect(SysID.isValid(SysID.generate()))
        #expect(!SysID.isValid("x' OR 1=1--"))
        #expect(!SysID.isValid(String(repeating: "a", count: 33)))
        #expect(!SysID.isValid(""))
    }
}
