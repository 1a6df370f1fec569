// swift-tools-version: 6.0
// SymorvaKit: the client SDK for Symorva communities.
//
// The module graph is the architecture (docs/architecture.md): `SymorvaMachines` depends on
// the runtime only; each C library belongs to one adapter module (`SymorvaTransport`: libcurl,
// `SymorvaStore`: SQLite, `SymorvaCrypto`: libolm and libsodium, `SymorvaMediaGStreamer`:
// GStreamer, Linux only); the wire layers and the
// product modules import no C library; `SymorvaKit` is the umbrella. `Scripts/layering`
// checks every import against these rules.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "SymorvaKit",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "SymorvaKit", targets: ["SymorvaKit"]),
        .library(name: "SymorvaTesting", targets: ["SymorvaTesting"]),
        .executable(name: "symorva", targets: ["symorva"]),
        // The C library of the language-neutral contract (include/symorva.h, docs/contract.md).
        .library(name: "SymorvaFFI", type: .dynamic, targets: ["SymorvaFFI"]),
        .executable(name: "symorva-bench", targets: ["symorva-bench"]),
    ],
    targets: [
        // MARK: C libraries (system libraries through module maps)
        .systemLibrary(
            name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"]), .brew(["curl"])]),
        .target(name: "CCurlShim", dependencies: ["CCurl"], path: "Sources/CCurlShim"),
        // The plain libolm loop `symorva-bench megolm` compares the driver with (bench only).
        .target(name: "CMegolmBaseline", dependencies: ["COlm"], path: "Sources/CMegolmBaseline"),
        .systemLibrary(
            name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        .systemLibrary(
            name: "COlm", path: "Sources/COlm", pkgConfig: "olm",
            providers: [.apt(["libolm-dev"]), .brew(["libolm"])]),
        .systemLibrary(
            name: "CSodium", path: "Sources/CSodium", pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"]), .brew(["libsodium"])]),
        // OpenSSL's libcrypto: AES-256-CTR, HMAC, HKDF, PBKDF2 and SHA-256 (SymorvaCipher).
        .systemLibrary(
            name: "CLibcrypto", path: "Sources/CLibcrypto", pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]),
        // GStreamer (Linux only: the media engine of SymorvaMediaGStreamer), with webrtcbin and SDP.
        .systemLibrary(
            name: "CGStreamer", path: "Sources/CGStreamer", pkgConfig: "gstreamer-webrtc-1.0",
            providers: [
                .apt([
                    "libgstreamer1.0-dev", "libgstreamer-plugins-base1.0-dev", "libgstreamer-plugins-bad1.0-dev",
                ])
            ]),
        .target(
            name: "CGStreamerShim",
            dependencies: [.target(name: "CGStreamer", condition: .when(platforms: [.linux]))],
            path: "Sources/CGStreamerShim"),

        // MARK: Core (pure)
        .target(name: "SymorvaRuntime", swiftSettings: swiftSettings),
        .target(name: "SymorvaMachines", dependencies: ["SymorvaRuntime"], swiftSettings: swiftSettings),

        // MARK: Adapters (the only modules that import C libraries, one library each)
        .target(name: "SymorvaHTTP", dependencies: ["SymorvaRuntime"], swiftSettings: swiftSettings),
        .target(
            name: "SymorvaTransport", dependencies: ["SymorvaHTTP", "CCurl", "CCurlShim"],
            swiftSettings: swiftSettings),
        .target(name: "SymorvaStore", dependencies: ["SymorvaRuntime", "CSQLite"], swiftSettings: swiftSettings),
        .target(name: "SymorvaCryptoDriver", dependencies: ["SymorvaRuntime"], swiftSettings: swiftSettings),
        .target(
            name: "SymorvaCrypto", dependencies: ["SymorvaRuntime", "SymorvaCryptoDriver", "COlm", "CSodium"],
            swiftSettings: swiftSettings),
        .target(name: "SymorvaCipher", dependencies: ["CLibcrypto"], swiftSettings: swiftSettings),

        // MARK: Wire layers (no C library)
        .target(
            name: "SymorvaMatrix", dependencies: ["SymorvaMachines", "SymorvaHTTP"], swiftSettings: swiftSettings),
        .target(name: "SymorvaServices", dependencies: ["SymorvaMatrix"], swiftSettings: swiftSettings),

        // MARK: Product modules (no C library)
        .target(
            name: "SymorvaFeatureKit", dependencies: ["SymorvaServices", "SymorvaStore", "SymorvaCrypto"],
            swiftSettings: swiftSettings),
        .target(
            name: "SymorvaChatStore", dependencies: ["SymorvaMatrix", "SymorvaStore"], swiftSettings: swiftSettings),
        .target(
            name: "SymorvaChat", dependencies: ["SymorvaChatStore", "SymorvaFeatureKit", "SymorvaCipher"],
            swiftSettings: swiftSettings),
        .target(
            name: "SymorvaWallet", dependencies: ["SymorvaFeatureKit", "SymorvaCrypto"],
            swiftSettings: swiftSettings),
        .target(name: "SymorvaMeetings", dependencies: ["SymorvaFeatureKit"], swiftSettings: swiftSettings),
        // The Linux media engine: GStreamer's webrtcbin behind SymorvaMeetings' media adapters, and
        // the thumbnails of images sent in chat (SymorvaChat's AttachmentThumbnailer).
        .target(
            name: "SymorvaMediaGStreamer",
            dependencies: [
                "SymorvaMeetings", "SymorvaChat",
                .target(name: "CGStreamer", condition: .when(platforms: [.linux])),
                .target(name: "CGStreamerShim", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: swiftSettings),
        .target(name: "SymorvaDirectory", dependencies: ["SymorvaFeatureKit"], swiftSettings: swiftSettings),
        .target(name: "SymorvaPush", dependencies: ["SymorvaChat", "SymorvaFeatureKit"], swiftSettings: swiftSettings),
        .target(
            name: "SymorvaE2EE",
            dependencies: ["SymorvaFeatureKit", "SymorvaCryptoDriver", "SymorvaCrypto", "SymorvaCipher"],
            swiftSettings: swiftSettings),
        .target(
            name: "SymorvaAIStudio", dependencies: ["SymorvaFeatureKit"], swiftSettings: swiftSettings),
        // The session feature: sign-in, accounts, the app flow, each account's running session.
        .target(
            name: "SymorvaSession", dependencies: ["SymorvaFeatureKit", "SymorvaTransport", "SymorvaCrypto"],
            swiftSettings: swiftSettings),
        // Where end-to-end encryption meets the other features: chat's and the studio's crypto
        // adapters and factories, the account's devices with their verified keys.
        .target(
            name: "SymorvaEncryptionBridge",
            dependencies: ["SymorvaChat", "SymorvaAIStudio", "SymorvaE2EE", "SymorvaSession"],
            swiftSettings: swiftSettings),
        .target(
            name: "SymorvaKit",
            dependencies: [
                "SymorvaSession", "SymorvaEncryptionBridge", "SymorvaChat", "SymorvaWallet", "SymorvaE2EE",
                "SymorvaMeetings", "SymorvaTransport", "SymorvaCrypto", "SymorvaCryptoDriver", "SymorvaDirectory",
                "SymorvaPush", "SymorvaAIStudio",
                .target(name: "SymorvaMediaGStreamer", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: swiftSettings),
        // The language-neutral contract: the product API as JSON requests, answers and updates
        // (docs/contract.md), served by `symorva serve --stdio` and the C library.
        .target(name: "SymorvaContract", dependencies: ["SymorvaKit"], swiftSettings: swiftSettings),
        // Its C library: `@_cdecl` functions over the engine, declared in include/symorva.h.
        .target(name: "SymorvaFFI", dependencies: ["SymorvaContract"], swiftSettings: swiftSettings),
        .target(
            name: "SymorvaTesting", dependencies: ["SymorvaRuntime", "SymorvaHTTP"],
            swiftSettings: swiftSettings),

        // MARK: Programs
        .target(
            name: "SymorvaREPL", dependencies: ["SymorvaKit"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "symorva", dependencies: ["SymorvaREPL", "SymorvaContract"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "symorva-bench",
            dependencies: [
                "SymorvaKit", "SymorvaTesting", "SymorvaContract", "SymorvaFFI",
                "CSQLite",  // the plain-loop baseline of `symorva-bench store`
                "CMegolmBaseline",  // the plain-loop baseline of `symorva-bench megolm`
            ],
            swiftSettings: swiftSettings),

        // MARK: Fuzz targets (libFuzzer with -DSYMORVA_FUZZING, else a corpus replay; Scripts/fuzz)
        .target(name: "SymorvaFuzzing", swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-sync-decoder", dependencies: ["SymorvaFuzzing", "SymorvaChatStore"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-redaction", dependencies: ["SymorvaFuzzing", "SymorvaChatStore"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-matrix-error", dependencies: ["SymorvaFuzzing", "SymorvaMatrix", "SymorvaHTTP"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-manifest", dependencies: ["SymorvaFuzzing", "SymorvaFeatureKit"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-contract", dependencies: ["SymorvaFuzzing", "SymorvaContract"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-scxml", dependencies: ["SymorvaFuzzing", "SymorvaTesting"], swiftSettings: swiftSettings),

        // MARK: Tests
        .testTarget(
            name: "SymorvaRuntimeTests", dependencies: ["SymorvaRuntime", "SymorvaTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaTestingTests", dependencies: ["SymorvaTesting", "SymorvaHTTP", "SymorvaRuntime"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaMachinesTests", dependencies: ["SymorvaMachines", "SymorvaTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaAdapterTests",
            dependencies: [
                "SymorvaTransport", "SymorvaStore", "SymorvaCryptoDriver", "SymorvaCrypto", "SymorvaCipher",
                "SymorvaTesting",
            ],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaMatrixTests", dependencies: ["SymorvaMatrix", "SymorvaTesting"], swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaServicesTests", dependencies: ["SymorvaServices", "SymorvaTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaFeatureKitTests", dependencies: ["SymorvaFeatureKit", "SymorvaTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaChatStoreTests", dependencies: ["SymorvaChatStore", "SymorvaTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaChatTests", dependencies: ["SymorvaChat", "SymorvaTesting"], swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaWalletTests", dependencies: ["SymorvaWallet", "SymorvaTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaAIStudioTests", dependencies: ["SymorvaAIStudio", "SymorvaTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaE2EETests", dependencies: ["SymorvaE2EE", "SymorvaChatStore", "SymorvaTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaMeetingsTests", dependencies: ["SymorvaMeetings", "SymorvaTesting"],
            swiftSettings: swiftSettings),
        // Linux only, like its module: the pipelines, missing elements and GStreamer's test sources.
        .testTarget(
            name: "SymorvaMediaGStreamerTests",
            dependencies: [
                "SymorvaMeetings", "SymorvaChat", "SymorvaTesting",
                .target(name: "SymorvaMediaGStreamer", condition: .when(platforms: [.linux])),
                .target(name: "CGStreamerShim", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaDirectoryTests", dependencies: ["SymorvaDirectory", "SymorvaTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaPushTests", dependencies: ["SymorvaPush", "SymorvaTesting"], swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaSessionTests", dependencies: ["SymorvaSession", "SymorvaTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaKitTests", dependencies: ["SymorvaKit", "SymorvaTesting"], swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaContractTests", dependencies: ["SymorvaContract", "SymorvaTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaREPLTests", dependencies: ["SymorvaREPL", "SymorvaTesting"],
            exclude: [
                "Transcripts", "SessionTranscripts", "DirectoryTranscripts", "StudioTranscripts", "MeetingTranscripts",
            ],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SymorvaIntegrationTests", dependencies: ["SymorvaKit", "SymorvaTesting", "SymorvaREPL"],
            swiftSettings: swiftSettings),
    ]
)
