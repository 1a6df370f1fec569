import SymorvaAIStudio
import SymorvaChat
import SymorvaDirectory
import SymorvaE2EE
import SymorvaEncryptionBridge
import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMeetings
import SymorvaPush
import SymorvaRuntime
import SymorvaSession
import SymorvaWallet

#if os(Linux)
    import SymorvaMediaGStreamer
#endif

// The SDK's own modules, attached to every signed-in account through the same extension point
// that third-party modules use (`AccountModuleFactory`). Each factory lives with its feature
// (`crypto` in SymorvaE2EE, `wallet`, `directory`, `push` in theirs; `chat` and `aiStudio`, which
// use `crypto`, in SymorvaEncryptionBridge); the umbrella only lists them and picks the
// platform's media engine for meetings.

extension AccountModuleFactory {
    /// The modules a community gets unless told otherwise: end-to-end encryption, chat, meetings
    /// and push (always), the wallet, the directory and the AI studio (when the manifest enables
    /// them). The community builds them in the order their declarations (`requires`,
    /// `uses`) give, whatever the order of the list.
    public static var standard: [AccountModuleFactory] {
        [crypto, platformChat, wallet, meetings, directory, push, aiStudio]
    }

    /// `chat` (SymorvaEncryptionBridge's) with the platform's thumbnailer for images sent without a thumbnail: on Linux
    /// ``/SymorvaMediaGStreamer/GStreamerImageThumbnailer``; elsewhere none until the app sets
    /// its own (`AccountChat.setThumbnailer`).
    static let platformChat: AccountModuleFactory = {
        var factory = chat
        let make = factory.make
        factory.make = { context in
            let module = await make(context)
            #if os(Linux)
                (module as? AccountChat)?.setThumbnailer(GStreamerImageThumbnailer())
            #endif
            return module
        }
        return factory
    }()

    /// Meetings, when the manifest enables them: the account's ``/SymorvaMeetings/AccountMeetings``
    /// (what `community.meetings` joins with while the account is active). No tables: meetings
    /// live on the services.
    ///
    /// The stage members' media engine is the platform's: on Linux GStreamer's `webrtcbin`
    /// (``/SymorvaMediaGStreamer/GStreamerMediaEngine/automatic(transport:tracer:)``, over the
    /// account's transport); elsewhere ``/SymorvaMeetings/UnavailableMediaEngine`` until the app
    /// plugs its own.
    public static let meetings = meetingsModule { transport, tracer in
        platformMediaEngine(transport: transport, tracer: tracer)
    }

    /// The platform's media engine for stage members.
    package static func platformMediaEngine(transport: any HTTPTransport, tracer: Tracer) -> any MediaEngine {
        #if os(Linux)
            GStreamerMediaEngine.automatic(transport: transport, tracer: tracer)
        #else
            UnavailableMediaEngine()
        #endif
    }

    /// A media engine whose stage voice is a sine tone of `frequency` hertz instead of a
    /// microphone (the REPL's `meeting join <room> --tone <hz>`): the room's mix plays on the
    /// machine's sink when an audio server is reachable, else it only feeds the level meter.
    /// `nil` where the SDK has no engine of its own (Apple platforms).
    package static func toneMediaEngine(frequency: Int, transport: any HTTPTransport, tracer: Tracer)
        -> (any MediaEngine)?
    {
        #if os(Linux)
            GStreamerMediaEngine.toneEngine(frequency: frequency, transport: transport, tracer: tracer)
        #else
            nil
        #endif
    }
}

extension AccountMigrations {
    /// The migrations of an account database with the standard modules: the session feature's,
    /// then what each of ``SymorvaFeatureKit/AccountModuleFactory/standard`` declares (chat's main
    /// list, `e2ee`, `wallet`, `studio`).
    public static var standard: AccountMigrations { community(modules: AccountModuleFactory.standard) }
}
