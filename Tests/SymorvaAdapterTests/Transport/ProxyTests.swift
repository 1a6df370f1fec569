import Foundation
import SymorvaHTTP
import SymorvaTransport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

@Suite("CurlTransport proxies are explicit")
struct ProxyTests {
    @Test("Proxy environment variables are ignored: requests go direct")
    func environmentIgnored() async throws {
        let server = try TestHTTPServer { _ in .respond(status: 200, headers: [], body: Array("direct".utf8)) }
        // A proxy nobody listens on: a request routed through it would fail to connect.
        let variables = ["http_proxy", "https_proxy", "all_proxy", "ALL_PROXY"]
        for name in variables { setenv(name, "http://127.0.0.1:1", 1) }
        setenv("no_proxy", "", 1)
        defer {
            for name in variables + ["no_proxy"] { unsetenv(name) }
        }
        let response = try await CurlTransport().send(HTTPRequest(url: server.url("/hello")))
        #expect(response.status == 200)
        #expect(response.body == Array("direct".utf8))
        #expect(server.requests.map(\.path) == ["/hello"])
    }

    @Test("A configured proxy carries every request")
    func explicitProxy() async throws {
        let proxy = try TestHTTPServer { _ in .respond(status: 200, headers: [], body: Array("via proxy".utf8)) }
        let transport = CurlTransport(configuration: .init(proxy: proxy.url("")))
        let response = try await transport.send(HTTPRequest(url: URL(string: "http://matrix.example.invalid/x")!))
        #expect(response.body == Array("via proxy".utf8))
        // A proxy is asked for the absolute URL.
        #expect(proxy.requests.map(\.path) == ["http://matrix.example.invalid/x"])
    }
}
