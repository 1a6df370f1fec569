import SymorvaMachines
import Testing

@Suite("Homeserver URL: https everywhere, plain http only for loopback")
struct HomeserverURLTests {
    @Test("https is accepted for any host")
    func httpsAccepted() {
        #expect(
            HomeserverURL.validate("https://matrix.example.org")
                == .success(HomeserverURL("https://matrix.example.org")!))
    }

    @Test("Plain http to a non-loopback host is refused as plainHTTP")
    func plainHTTPRefused() {
        for text in [
            "http://matrix.example.org", "HTTP://matrix.example.org:8008", "http://10.0.0.1", "http://128.0.0.1",
            "http://127.0.0.1.example.org", "http://localhost.example.org", "http://[::2]:8008", "http://1270.0.0.1",
        ] {
            #expect(HomeserverURL.validate(text) == .failure(.plainHTTP), "\(text)")
            #expect(HomeserverURL(text) == nil, "\(text)")
        }
    }

    @Test("Plain http to a loopback host stays allowed")
    func loopbackAllowed() {
        for text in ["http://127.0.0.1:8008", "http://127.255.0.9", "http://[::1]:8008", "http://LOCALHOST:8008/"] {
            #expect(HomeserverURL(text) != nil, "\(text)")
        }
    }

    @Test("Something that is not an http(s) URL is notAbsoluteHTTPURL")
    func notAURL() {
        #expect(HomeserverURL.validate("ftp://127.0.0.1") == .failure(.notAbsoluteHTTPURL))
        #expect(HomeserverURL.validate("matrix.example.org") == .failure(.notAbsoluteHTTPURL))
    }
}
