import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Push for one signed-in account: its pusher (a `PusherMachine` host in the
/// account's scope), push rules and pushed events, bound to the account for its whole life.
///
/// Apps use ``PushClient`` (`community.push`), which follows the active account and delegates here.
public final class AccountPush: AccountModule {
    /// The signed-in member.
    public let userID: UserID
    /// The account's pusher as this installation set it.
    public var pusher: ObservableValue<PusherState> { host.states }

    let requester: any MatrixRequester
    let services: CommunityServicesClient
    let scope: AccountScope
    let host: MachineHost<PusherMachine>

    /// Push for the account signed in to `scope`.
    public init(
        userID: UserID, requester: any MatrixRequester, services: CommunityServicesClient, scope: AccountScope,
        tracer: Tracer = .shared
    ) {
        self.userID = userID
        self.requester = requester
        self.services = services
        self.scope = scope
        let interpreter = ClosureInterpreter<PusherMachine> { effect, _ in
            switch effect {
            case .setPusher(let pusher):
                do throws(MatrixRequestError) {
                    _ = try await requester.send(PushAPI.setPusher(json: PushWire.setBody(pusher)))
                    return .setAnswered(.success(pusher))
                } catch {
                    return .setAnswered(.failure(PushWire.error(error)))
                }
            case .removePusher(let pusher):
                do throws(MatrixRequestError) {
                    _ = try await requester.send(PushAPI.setPusher(json: PushWire.removeBody(pusher)))
                    return .removeAnswered(.success(pusher))
                } catch {
                    return .removeAnswered(.failure(PushWire.error(error)))
                }
            }
        }
        host = MachineHost(
            machine: PusherMachine(), initial: .unregistered, interpreter: interpreter, instance: scope.label,
            scope: scope, tracer: tracer)
    }

    /// Stops the pusher host.
    public func stop() async { await host.stop() }

    func ensureCurrent() throws(PushError) {
        if scope.isEnded { throw .accountEnded }
    }

    /// Looks for this installation's pusher (same profile tag) on the homeserver and adopts it,
    /// so that ``PushClient/removePusher()`` removes it after a restart.
    func adoptInstallationPusher(profileTag: String) async {
        guard let pushers = try? await pushers(),
            let mine = pushers.first(where: { $0.profileTag == profileTag })
        else { return }
        await host.send(.adopted(mine))
    }

    func send(_ endpoint: MatrixEndpoint) async throws(PushError) -> HTTPResponse {
        try ensureCurrent()
        do { return try await requester.send(endpoint) } catch { throw PushWire.error(error) }
    }

    func pushers() async throws(PushError) -> [Pusher] {
        let response = try await send(PushAPI.pushers())
        return try PushWire.decode(PushWire.PushersResponse.self, from: response.body).pushers.map(\.pusher)
    }

    func setPusher(_ pusher: Pusher) async throws(PushError) -> Pusher {
        try ensureCurrent()
        let outcome = await host.send(.setRequested(pusher)) { state -> Result<Pusher, PushError>? in
            switch state {
            case .registered(let registered) where registered == pusher: .success(registered)
            case .failed(let failed, let error) where failed == pusher: .failure(error)
            case .unregistered, .registering, .registered, .removing, .failed: nil
            }
        }
        guard let outcome else { throw .accountEnded }
        return try outcome.get()
    }

    func removePusher() async throws(PushError) {
        try ensureCurrent()
        let outcome = await host.send(
            .removeRequested, ignored: { _ in .success(()) },
            until: { state -> Result<Void, PushError>? in
                switch state {
                case .unregistered: .success(())
                case .failed(_, let error): .failure(error)
                case .registering, .registered, .removing: nil
                }
            })
        guard let outcome else { throw .accountEnded }
        try outcome.get()
    }

    func event(roomID: RoomID, eventID: EventID) async throws(PushError) -> PushedEvent {
        let response = try await send(PushAPI.event(roomID: roomID, eventID: eventID))
        let event = try PushWire.decode(PushWire.EventJSON.self, from: response.body)
        let isEncrypted = event.type == "m.room.encrypted"
        return PushedEvent(
            eventID: EventID(event.eventID), roomID: event.roomID.map { RoomID($0) } ?? roomID, sender: event.sender,
            type: event.type, originServerTimestamp: event.originServerTS,
            body: event.type == "m.room.message" ? event.content?.body : nil, isEncrypted: isEncrypted)
    }

    // MARK: The community's reference gateway

    /// The reference gateway's pushkey routes: the pushkey travels in the body, never in a URL
    /// (access logs write paths and queries).
    static let gatewayPath = "/_symorva/v1/push/pushkeys"

    private static func pushkeyBody(_ pushkey: String, _ appID: String, after: Int? = nil) -> [UInt8] {
        var body = JSONObjectWriter()
        body.string("pushkey", pushkey)
        body.string("app_id", appID)
        if let after { body.raw("after", String(after)) }
        return body.bytes
    }

    func registerWithGateway(pushkey: String, appID: String) async throws(PushError) {
        try ensureCurrent()
        do throws(ServicesError) {
            _ = try await services.send(.post, Self.gatewayPath, json: Self.pushkeyBody(pushkey, appID))
        } catch {
            throw PushWire.error(error)
        }
    }

    func unregisterFromGateway(pushkey: String, appID: String) async throws(PushError) {
        try ensureCurrent()
        do throws(ServicesError) {
            _ = try await services.send(.post, Self.gatewayPath + "/remove", json: Self.pushkeyBody(pushkey, appID))
        } catch {
            throw PushWire.error(error)
        }
    }

    func gatewayNotifications(pushkey: String, appID: String, after: Int) async throws(PushError)
        -> [GatewayNotification]
    {
        try ensureCurrent()
        struct Page: Decodable {
            struct Item: Decodable {
                var seq: Int
                var event_id: String?
                var room_id: String?
                var sender: String?
                var unread: Int?
                var prio: String?
            }
            var notifications: [Item]
        }
        let body: [UInt8]
        do throws(ServicesError) {
            body = try await services.send(
                .post, Self.gatewayPath + "/notifications", json: Self.pushkeyBody(pushkey, appID, after: after))
        } catch {
            throw PushWire.error(error)
        }
        return try PushWire.decode(Page.self, from: body).notifications.map {
            GatewayNotification(
                sequence: $0.seq, eventID: $0.event_id, roomID: $0.room_id, sender: $0.sender, unread: $0.unread,
                priority: $0.prio)
        }
    }
}
