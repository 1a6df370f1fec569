import SymorvaMachines
import SymorvaRuntime

/// The stage member's media session in use, shared by a meeting room and its interpreter (which
/// disconnects it on ``/SymorvaMachines/MeetingMachine/Effect/closeMediaSession``).
final class MediaSlot: Sendable {
    private let session = Lock<(any MediaSession)?>(nil)

    var current: (any MediaSession)? { session.withLock { $0 } }

    func set(_ new: any MediaSession) { session.withLock { $0 = new } }

    func take() -> (any MediaSession)? {
        session.withLock { slot in
            defer { slot = nil }
            return slot
        }
    }
}

/// Performs a meeting machine's effects with the meetings service and the media slot.
struct MeetingInterpreter: EffectInterpreter {
    typealias Machine = MeetingMachine

    let service: MeetingsService
    let media: MediaSlot

    func perform(_ effect: MeetingMachine.Effect, context: EffectContext<MeetingMachine.Event>) async
        -> MeetingMachine.Event?
    {
        switch effect {
        case .sendJoin(let roomID, let broadcast):
            do throws(MeetingError) {
                return .joinResponse(.success(try await service.join(roomID, broadcast: broadcast)))
            } catch {
                return .joinResponse(.failure(error))
            }
        case .pollFeed(let meetingID, let since):
            do throws(MeetingError) {
                return .feedResponse(.success(try await service.changes(meetingID, since: since)))
            } catch {
                return .feedResponse(.failure(error))
            }
        case .requestMediaSession(let meetingID):
            do throws(MeetingError) {
                return .mediaSessionResponse(.success(try await service.mediaSession(meetingID)))
            } catch {
                return .mediaSessionResponse(.failure(error))
            }
        case .closeMediaSession:
            await media.take()?.disconnect()
            return .mediaSessionClosed
        case .sendLeave(let meetingID):
            do throws(MeetingError) {
                try await service.leave(meetingID)
                return .leaveResponse(.left)
            } catch {
                return .leaveResponse(.failed(error))
            }
        case .scheduleFeedRetry, .scheduleMediaRenewal, .scheduleMediaRetry, .cancel:
            // The host performs timers and cancellations itself.
            return nil
        }
    }
}
