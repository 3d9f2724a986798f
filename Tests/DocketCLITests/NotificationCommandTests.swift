@testable import DocketCLI
import DocketKit
import DocketModel
import DocketTestSupport
import Foundation
import Testing

@Suite("docket notifications and notify")
struct NotificationCommandTests {
    @Test("a UnifiedPush endpoint registered with notify register receives john's notification, notify decrypt reads it, notifications lists and marks it", .timeLimit(.minutes(2)))
    func unifiedPush() async throws {
        try await withPushReceiver { receiver, receiverURL in
            try await withLiveServer(configure: { $0.pushAllowInsecureEndpoints = true }) { base in
                let cli = CLIHarness()
                #expect(await cli.login(base) == 0)
                let endpoint = receiverURL + "/up/desktop"
                let registered = await cli.run("notify", "register", "--unifiedpush", endpoint, "--name", "Desktop")
                #expect(registered.code == 0, "\(registered.err)")
                let keys = cli.directory.appendingPathComponent("push-keys.json")
                let attributes = try FileManager.default.attributesOfItem(atPath: keys.path)
                #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
                // Not an endpoint: refused before anything is stored.
                #expect(await cli.run("notify", "register", "--unifiedpush", base + "/nothing-here").code == 1)

                let beth = try DocketClient(instance: base, credentials: .basic(userName: "beth.anglin", password: "password"))
                let john = try await beth.table.records(in: "sys_user", query: try EncodedQuery("user_name=john.doe"), fields: ["sys_id"]).records[0].sysID
                _ = try await beth.table.createRecord(with: ["short_description": "Printer on fire", "assigned_to": john], in: "incident")
                let deadline = ContinuousClock.now + .seconds(10)
                while receiver.messages.isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                let message = try #require(receiver.messages.first)
                #expect(message.headers["content-encoding"] == "aes128gcm")
                let file = cli.directory.appendingPathComponent("message.bin")
                try message.body.write(to: file)
                let read = await cli.run("notify", "decrypt", "--endpoint", endpoint, "--file", file.path)
                #expect(read.code == 0, "\(read.err)")
                #expect(read.out.contains("was assigned to you") && read.out.contains("Printer on fire"))
                #expect(await cli.run("notify", "decrypt", "--endpoint", receiverURL + "/up/other", "--file", file.path).code == 1)

                let listed = await cli.run("notifications")
                #expect(listed.code == 0 && listed.out.contains("1 unread") && listed.out.contains("* INC"))
                #expect(await cli.run("notifications", "--mark-read").out.contains("Marked 1 read."))
                #expect(await cli.run("notifications", "--unread").out.contains("No unread notifications."))
                let devices = await cli.run("notify", "devices")
                #expect(devices.out.contains("Desktop (unifiedpush)"))
                let id = String(devices.out.prefix(32))
                #expect(await cli.run("notify", "remove", id).code == 0)
                #expect(await cli.run("notify", "devices").out.contains("No devices."))
                #expect(await cli.run("notifications", "--limit", "0").code == 2)

                // What reaches him: a rule off, listed as off, and no notification of it; then on again.
                #expect(await cli.run("notify", "mute", "assigned to you").out.contains("'Assigned to you' is off."))
                #expect(await cli.run("notify", "rules").out.contains("off  Assigned to you"))
                _ = try await beth.table.createRecord(with: ["short_description": "Muted", "assigned_to": john], in: "incident")
                try await Task.sleep(for: .milliseconds(800))
                #expect(await cli.run("notifications", "--unread").out.contains("No unread notifications."))
                #expect(await cli.run("notify", "unmute", "Assigned to you").code == 0)
                #expect(await cli.run("notify", "rules").out.contains("on   Assigned to you"))
                #expect(await cli.run("notify", "mute", "No such rule").code == 1)
            }
        }
    }
}
