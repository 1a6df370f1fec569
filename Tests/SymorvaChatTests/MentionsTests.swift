import SymorvaMachines
import Testing

@testable import SymorvaChat

/// `m.mentions` as sent and as read: what a text mentions, the JSON that goes out, and which
/// messages mention the account.
@Suite("Mentions")
struct MentionsTests {
    let me = UserID("@ana:example.com")

    @Test("A text mentions the user IDs and @room it holds as words, each once")
    func parsing() {
        let mentions = Mentions(parsing: "hi @ana:example.com, @bo:example.org and @ana:example.com (@room) @roommate")
        #expect(mentions.userIDs == [UserID("@ana:example.com"), UserID("@bo:example.org")])
        #expect(mentions.room)
        #expect(Mentions(parsing: "no one here, @ nor @room2") == Mentions())
    }

    @Test("m.mentions carries the user IDs, and room only when set")
    func json() {
        #expect(Mentions(userIDs: [me]).json == #"{"user_ids":["@ana:example.com"]}"#)
        #expect(Mentions(room: true).json == #"{"user_ids":[],"room":true}"#)
    }

    @Test("A message mentions the account by m.mentions, or without it by its ID or localpart in the body")
    func detection() {
        func mentions(_ json: String) -> Bool { Mentions.mention(of: me, in: Array(json.utf8)) }
        #expect(mentions(#"{"body":"x","m.mentions":{"user_ids":["@ana:example.com"]}}"#))
        #expect(mentions(#"{"body":"x","m.mentions":{"room":true}}"#))
        // m.mentions says whom it means: the name in the body does not count then.
        #expect(!mentions(#"{"body":"ana, look","m.mentions":{}}"#))
        #expect(!mentions(#"{"body":"x","m.mentions":{"user_ids":["@bo:example.org"]}}"#))
        #expect(mentions(#"{"body":"Ana, look"}"#))
        #expect(mentions(#"{"body":"ping @ana:example.com now"}"#))
        #expect(!mentions(#"{"body":"banana"}"#))
        #expect(!mentions(#"not json"#))
    }
}
