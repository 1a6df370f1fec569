import Foundation
import SymorvaHTTP
import SymorvaTransport
import Testing

/// An HTTPS server on 127.0.0.1 with a freshly generated self-signed certificate: Python's
/// `http.server` behind `ssl`, started by the test and stopped when released.
private final class LocalTLSServer {
    let port: Int
    let certificatePath: String
    private let process: Process
    private let folder: TemporaryDirectory

    static var isAvailable: Bool {
        ["/usr/bin/openssl", "/usr/bin/python3"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }

    init() throws {
        folder = try TemporaryDirectory()
        certificatePath = folder.file("cert.pem")
        let keyPath = folder.file("key.pem")
        try Self.run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                keyPath, "-out", certificatePath, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
        let script = """
            import http.server, ssl, sys
            class Handler(http.server.BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def do_GET(self):
                    body = b"secure"
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                def log_message(self, *args):
                    pass
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(sys.argv[1], sys.argv[2])
            server.socket = context.wrap_socket(server.socket, server_side=True)
            print(server.server_address[1], flush=True)
            server.serve_forever()
            """
        let output = Pipe()
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", script, certificatePath, keyPath]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line = Data()
        while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) {
            line.append(byte)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            kill(process.processIdentifier, SIGKILL)
            throw POSIXError(.EIO)
        }
        self.port = port
    }

    deinit {
        // SIGKILL, not terminate(): the child may inherit a mask that blocks SIGTERM.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    var url: URL { URL(string: "https://127.0.0.1:\(port)/")! }

    private static func run(_ executable: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw POSIXError(.EIO) }
    }
}

@Suite("TLS verification", .enabled(if: LocalTLSServer.isAvailable))
struct TLSVerificationTests {
    @Test("An untrusted certificate fails with .tls; trusting its CA in tests succeeds")
    func selfSignedCertificate() async throws {
        let server = try LocalTLSServer()
        await #expect(throws: TransportError.tls) {
            try await CurlTransport().send(HTTPRequest(url: server.url))
        }
        let trusting = CurlTransport(testingCertificateAuthorityFile: server.certificatePath)
        let response = try await trusting.send(HTTPRequest(url: server.url))
        #expect(response.status == 200)
        #expect(response.body == Array("secure".utf8))
    }
}
