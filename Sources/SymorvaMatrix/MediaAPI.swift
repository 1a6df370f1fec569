import SymorvaHTTP
import SymorvaMachines

/// The media endpoints, as pure request builders.
///
/// Downloads, thumbnails and the configuration are the authenticated media API
/// (`/_matrix/client/v1/media/…`, spec v1.11): they carry the access token, and a homeserver
/// that requires authenticated media (Synapse does by default) refuses the old unauthenticated
/// `/_matrix/media/v3/download`. Uploads are still under `/_matrix/media/v3/upload`, and the
/// asynchronous `create` under `/_matrix/media/v1/create`.
package enum MediaAPI {
    static let clientMedia = "/_matrix/client/v1/media"
    static let media = "/_matrix/media"

    /// How a thumbnail is made from the original.
    package enum ThumbnailMethod: String, Sendable, Hashable {
        /// Fit inside the size, keeping the aspect ratio.
        case scale
        /// Fill the size, cropping what overflows.
        case crop
    }

    /// `GET /_matrix/client/v1/media/config`: `m.upload.size`, the largest upload accepted.
    package static func configuration() -> MatrixEndpoint {
        MatrixEndpoint(method: .get, path: "\(clientMedia)/config", requiresAuth: true)
    }

    /// `GET /_matrix/client/v1/media/download/{serverName}/{mediaId}`.
    package static func download(_ uri: MediaURI) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .get, path: "\(clientMedia)/download/\(percentEncoded(uri.serverName))/\(uri.mediaID)",
            requiresAuth: true)
    }

    /// `GET /_matrix/client/v1/media/thumbnail/{serverName}/{mediaId}?width=…&height=…&method=…`.
    package static func thumbnail(_ uri: MediaURI, width: Int, height: Int, method: ThumbnailMethod) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .get, path: "\(clientMedia)/thumbnail/\(percentEncoded(uri.serverName))/\(uri.mediaID)",
            query: [
                .init(name: "width", value: String(width)), .init(name: "height", value: String(height)),
                .init(name: "method", value: method.rawValue),
            ], requiresAuth: true)
    }

    /// `POST /_matrix/media/v3/upload?filename=…` (the client adds the body and its type).
    package static func upload(fileName: String?) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .post, path: "\(media)/v3/upload",
            query: fileName.map { [.init(name: "filename", value: $0)] } ?? [], requiresAuth: true)
    }

    /// `POST /_matrix/media/v1/create`: reserves an `mxc://` URI whose bytes come later.
    package static func create() -> MatrixEndpoint {
        MatrixEndpoint(method: .post, path: "\(media)/v1/create", body: Array("{}".utf8), requiresAuth: true)
    }

    /// `PUT /_matrix/media/v3/upload/{serverName}/{mediaId}?filename=…`: the bytes of a reserved URI.
    package static func upload(to uri: MediaURI, fileName: String?) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .put, path: "\(media)/v3/upload/\(percentEncoded(uri.serverName))/\(uri.mediaID)",
            query: fileName.map { [.init(name: "filename", value: $0)] } ?? [], requiresAuth: true)
    }
}
