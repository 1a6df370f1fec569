import SymorvaMachines

/// The profile endpoints (`/profile/{userId}/…`), as pure request builders.
package enum ProfileAPI {
    static let prefix = AuthAPI.clientPrefix

    /// `PUT /profile/{userId}/displayname` with `{"displayname": name}`.
    package static func setDisplayName(userID: UserID, _ name: String) -> MatrixEndpoint {
        var body = JSONObjectWriter()
        body.string("displayname", name)
        return MatrixEndpoint(
            method: .put, path: "\(prefix)/profile/\(percentEncoded(userID.rawValue))/displayname",
            body: Array(body.text.utf8), requiresAuth: true)
    }

    /// `PUT /profile/{userId}/avatar_url` with `{"avatar_url": uri}`.
    package static func setAvatarURL(userID: UserID, _ uri: MediaURI) -> MatrixEndpoint {
        var body = JSONObjectWriter()
        body.string("avatar_url", uri.uriString)
        return MatrixEndpoint(
            method: .put, path: "\(prefix)/profile/\(percentEncoded(userID.rawValue))/avatar_url",
            body: Array(body.text.utf8), requiresAuth: true)
    }

    /// `GET /profile/{userId}`: `displayname` and `avatar_url`.
    package static func profile(userID: UserID) -> MatrixEndpoint {
        MatrixEndpoint(method: .get, path: "\(prefix)/profile/\(percentEncoded(userID.rawValue))", requiresAuth: true)
    }
}
