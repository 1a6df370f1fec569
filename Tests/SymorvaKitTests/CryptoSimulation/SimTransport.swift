import Foundation
import SymorvaHTTP

/// One device incarnation's wire to the ``SimHomeserver``: the account stack sends through the
/// ordinary ``/SymorvaHTTP/HTTPTransport`` protocol and the server knows the device by the
/// transport it came through (every device has its own). A killed incarnation's transport is cut:
/// nothing it sends after the kill reaches the server.
struct SimTransport: HTTPTransport {
    let server: SimHomeserver
    /// The device (`@user|DEVICE`).
    let device: String
    /// `<device>#<n>`: the n-th process of this device.
    let incarnation: String

    func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        try await server.handle(request, device: device, incarnation: incarnation)
    }
}

/// The planted message bodies: each is unique, and none may ever be found in a store file or on
/// the wire.
enum SimCanary {
    static let marker = "qzsimcanary"

    static func body(seed: UInt64, number: Int) -> String { "\(marker)-\(seed)-\(number)" }
}
