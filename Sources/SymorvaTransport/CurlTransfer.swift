import CCurl
import CCurlShim
import SymorvaHTTP
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One request's libcurl easy handle, its response buffers and its continuation.
///
/// Safety of `@unchecked Sendable` (a C boundary object): the caller's task creates and
/// configures the transfer, then hands it to the multi loop through the loop's mutex (a
/// happens-before edge). From then on only the loop thread touches the easy handle, the
/// buffers and the continuation; libcurl calls the write and header callbacks on that thread,
/// from inside `curl_multi_perform`. The one field other threads touch is ``cancelRequested``,
/// an atomic.
final class CurlTransfer: @unchecked Sendable {
    typealias Completion = CheckedContinuation<Result<HTTPResponse, TransportError>, Never>

    /// The easy handle; owned by this object and cleaned up in `deinit`.
    let easy: UnsafeMutableRawPointer
    /// The largest body accepted, in bytes.
    let limit: Int
    /// Set by the caller's cancellation handler, from any thread.
    let cancelRequested = Atomic<Bool>(false)

    var continuation: Completion?
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private(set) var body: [UInt8] = []
    private(set) var headers = HTTPHeaders()
    private(set) var exceededLimit = false
    /// The body file (``HTTPRequest/bodyFile``), open while the transfer lives; -1 for none.
    private var bodyDescriptor: Int32 = -1
    /// Changes the body file's bytes as they are read (``HTTPBodyFile/transform``).
    private var bodyTransform: (any HTTPBodyTransform)?
    /// The response file (``HTTPRequest/responseFile``), open while the transfer lives; -1 for none.
    private var responseDescriptor: Int32 = -1
    /// Response body bytes written to the response file.
    private var responseBytes = 0
    /// Whether this response's body goes to the response file: decided at its first byte, yes
    /// for a 2xx answer; an error's body (a Matrix error) stays in memory for the caller.
    private var bodyGoesToFile: Bool?
    /// Reading the body file or writing the response file failed: the abort is `fileAccess`.
    private(set) var fileFailed = false
    private var progress: HTTPTransferProgress?
    /// Bytes of a file body each read callback may take, and libcurl's upload buffer.
    static let uploadChunkBytes = 256 << 10

    /// Creates and configures an easy handle for `request`.
    init(
        request: HTTPRequest, configuration: CurlTransport.Configuration, certificateAuthorityFile: String?
    ) throws(TransportError) {
        guard let easy = curl_easy_init() else { throw .other(code: -1, message: "curl_easy_init failed") }
        self.easy = easy
        self.limit = request.maximumResponseBytes ?? configuration.maximumResponseBytes
        try configure(request, configuration: configuration, certificateAuthorityFile: certificateAuthorityFile)
    }

    deinit {
        curl_easy_cleanup(easy)
        if let headerList { curl_slist_free_all(headerList) }
        closeFiles()
    }

    /// Resumes the caller once; later calls do nothing. The files are closed first: libcurl
    /// no longer calls back (the easy handle has left the multi handle, or never joined it),
    /// and the caller may move the response file as soon as it resumes.
    func finish(_ result: Result<HTTPResponse, TransportError>) {
        closeFiles()
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(returning: result)
    }

    /// The error for a libcurl failure of this transfer.
    func failure(for code: CURLcode) -> TransportError {
        fileFailed ? .fileAccess : Self.map(code, limit: limit, exceededLimit: exceededLimit)
    }

    private func closeFiles() {
        if bodyDescriptor >= 0 { close(bodyDescriptor) }
        if responseDescriptor >= 0 { close(responseDescriptor) }
        bodyDescriptor = -1
        responseDescriptor = -1
    }

    /// The response assembled from what libcurl delivered.
    func response() -> HTTPResponse {
        var status = 0
        symorva_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        return HTTPResponse(status: status, headers: headers, body: body)
    }

    /// How many new connections libcurl opened for this transfer (0 when one was reused).
    func newConnectionCount() -> Int {
        var count = 0
        symorva_curl_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &count)
        return count
    }

    // MARK: Configuration

    private func configure(
        _ request: HTTPRequest, configuration: CurlTransport.Configuration, certificateAuthorityFile: String?
    ) throws(TransportError) {
        let url = request.url
        guard let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http", url.host != nil else {
            throw .invalidURL
        }
        try check(symorva_curl_setopt_string(easy, CURLOPT_URL, url.absoluteString), invalid: .invalidURL)
        try check(symorva_curl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https"))
        try check(symorva_curl_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        try check(symorva_curl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0))
        try check(symorva_curl_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)))
        try check(symorva_curl_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1))
        if request.deliversAtMostOnce {
            // libcurl retries only on a reused connection (Curl_retry_request); a fresh one is
            // never retried, so the request leaves once.
            try check(symorva_curl_setopt_long(easy, CURLOPT_FRESH_CONNECT, 1))
        }
        try check(symorva_curl_setopt_string(easy, CURLOPT_ACCEPT_ENCODING, ""))
        try check(symorva_curl_setopt_string(easy, CURLOPT_USERAGENT, configuration.userAgent))
        // A proxy only when the app configures one: an empty string makes libcurl ignore the
        // proxy environment variables (`http_proxy`, `all_proxy`, …), which anyone who can set
        // the process's environment could otherwise use to route tokens through a host of theirs.
        try check(symorva_curl_setopt_string(easy, CURLOPT_PROXY, configuration.proxy?.absoluteString ?? ""))
        // TLS verification is always on; there is deliberately no option to turn it off.
        try check(symorva_curl_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 1))
        try check(symorva_curl_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 2))
        if let certificateAuthorityFile {
            try check(symorva_curl_setopt_string(easy, CURLOPT_CAINFO, certificateAuthorityFile))
        }
        let connectTimeout = Self.milliseconds(configuration.connectTimeout)
        let totalTimeout = Self.milliseconds(request.timeout ?? configuration.requestTimeout)
        try check(symorva_curl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, connectTimeout))
        try check(symorva_curl_setopt_long(easy, CURLOPT_TIMEOUT_MS, totalTimeout))
        // Rejects a declared Content-Length over the limit before any byte arrives; the write
        // callback enforces the limit for bodies of unknown length.
        try check(symorva_curl_setopt_offset(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(limit)))
        try configureMethodAndBody(request)
        try configureHeaders(request)
        try configureCallbacks()
        try configureFiles(request)
    }

    /// A body read from a file, a response written to one, progress: media transfers.
    private func configureFiles(_ request: HTTPRequest) throws(TransportError) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        if let file = request.bodyFile {
            guard request.body.isEmpty, file.length >= 0 else { throw .invalidHeader }
            bodyDescriptor = open(file.path, O_RDONLY | O_CLOEXEC)
            guard bodyDescriptor >= 0 else { throw .fileAccess }
            if let transform = file.transform {
                guard transform.restart() else { throw .fileAccess }
                bodyTransform = transform
            }
            // POST mechanics with a read callback (the method stays the request's own through
            // CUSTOMREQUEST): libcurl takes the body a chunk at a time as the socket drains.
            try check(symorva_curl_setopt_long(easy, CURLOPT_POST, 1))
            try check(symorva_curl_setopt_offset(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(file.length)))
            try check(symorva_curl_setopt_data_callback(easy, CURLOPT_READFUNCTION, curlReadCallback))
            try check(symorva_curl_setopt_pointer(easy, CURLOPT_READDATA, context))
            try check(symorva_curl_setopt_seek_callback(easy, curlSeekCallback))
            try check(symorva_curl_setopt_pointer(easy, CURLOPT_SEEKDATA, context))
            try check(symorva_curl_setopt_long(easy, CURLOPT_UPLOAD_BUFFERSIZE, Self.uploadChunkBytes))
        }
        if let path = request.responseFile {
            responseDescriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard responseDescriptor >= 0 else { throw .fileAccess }
        }
        if request.bodyFile != nil || request.responseFile != nil {
            // A long transfer is bounded by its pace, not its total time: under 1 byte a
            // second for 30 s aborts it as timed out.
            try check(symorva_curl_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1))
            try check(symorva_curl_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, 30))
        }
        if let progress = request.progress {
            self.progress = progress
            try check(symorva_curl_setopt_long(easy, CURLOPT_NOPROGRESS, 0))
            try check(symorva_curl_setopt_xferinfo_callback(easy, curlProgressCallback))
            try check(symorva_curl_setopt_pointer(easy, CURLOPT_XFERINFODATA, context))
        }
    }

    private func configureMethodAndBody(_ request: HTTPRequest) throws(TransportError) {
        switch request.method {
        case .get where request.body.isEmpty:
            try check(symorva_curl_setopt_long(easy, CURLOPT_HTTPGET, 1))
        case .head:
            try check(symorva_curl_setopt_long(easy, CURLOPT_NOBODY, 1))
        default:
            try check(symorva_curl_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method.rawValue))
            if request.bodyFile == nil, !request.body.isEmpty || request.method != .delete {
                try check(symorva_curl_setopt_offset(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count)))
                // A non-empty buffer so that the pointer is never null; the size set above rules.
                let bytes = request.body.isEmpty ? [0] : request.body
                let code = bytes.withUnsafeBufferPointer { buffer in
                    // COPYPOSTFIELDS copies the bytes, so the buffer need not outlive this call.
                    symorva_curl_setopt_pointer(
                        easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: buffer.baseAddress))
                }
                try check(code)
            }
        }
    }

    private func configureHeaders(_ request: HTTPRequest) throws(TransportError) {
        var lines: [String] = []
        for (name, value) in request.headers {
            guard Self.isValidHeader(name: name, value: value) else { throw .invalidHeader }
            guard !HTTPHeaders.equalNames(name, "Authorization") else { throw .invalidHeader }
            lines.append(value.isEmpty ? "\(name);" : "\(name): \(value)")
        }
        if let token = request.bearerToken {
            guard Self.isValidHeader(name: "Authorization", value: token.exposedValue) else { throw .invalidHeader }
            lines.append("Authorization: Bearer \(token.exposedValue)")
        }
        // No `Expect: 100-continue` round trip before bodies over 1 KiB.
        lines.append("Expect:")
        for line in lines {
            guard let appended = curl_slist_append(headerList, line) else {
                throw .other(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "out of memory")
            }
            headerList = appended
        }
        try check(symorva_curl_setopt_pointer(easy, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(headerList)))
    }

    private func configureCallbacks() throws(TransportError) {
        // Unretained: the multi loop holds this transfer strongly for as long as the easy handle
        // is attached to the multi handle, which is the only time libcurl calls back.
        let context = Unmanaged.passUnretained(self).toOpaque()
        try check(symorva_curl_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION, curlWriteCallback))
        try check(symorva_curl_setopt_pointer(easy, CURLOPT_WRITEDATA, context))
        try check(symorva_curl_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION, curlHeaderCallback))
        try check(symorva_curl_setopt_pointer(easy, CURLOPT_HEADERDATA, context))
    }

    private func check(_ code: CURLcode, invalid: TransportError? = nil) throws(TransportError) {
        guard code != CURLE_OK else { return }
        throw invalid ?? Self.map(code, limit: limit, exceededLimit: false)
    }

    private static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        let total = seconds.multipliedReportingOverflow(by: 1000)
        guard !total.overflow, total.partialValue >= 0 else { return seconds < 0 ? 1 : Int.max }
        return max(1, Int(total.partialValue) + Int(attoseconds / 1_000_000_000_000_000))
    }

    private static func isValidHeader(name: String, value: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }
            && value.utf8.allSatisfy { $0 != 0x0D && $0 != 0x0A && $0 != 0 }
    }

    // MARK: Callbacks (loop thread)

    fileprivate func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if bodyGoesToFile == nil {
            var status = 0
            symorva_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            bodyGoesToFile = responseDescriptor >= 0 && (200..<300).contains(status)
        }
        let toFile = bodyGoesToFile == true
        guard (toFile ? responseBytes : body.count) + bytes.count <= limit else {
            exceededLimit = true
            return 0  // Anything but `bytes.count` makes libcurl abort with CURLE_WRITE_ERROR.
        }
        guard toFile else {
            body.append(contentsOf: bytes)
            return bytes.count
        }
        var offset = 0
        while offset < bytes.count, let base = bytes.baseAddress {
            let written = write(responseDescriptor, base + offset, bytes.count - offset)
            if written < 0, errno == EINTR { continue }
            guard written > 0 else {
                fileFailed = true
                return 0
            }
            offset += written
        }
        responseBytes += bytes.count
        return bytes.count
    }

    /// Fills libcurl's upload buffer from the body file.
    fileprivate func readBody(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        while true {
            let count = read(bodyDescriptor, buffer.baseAddress, min(buffer.count, Self.uploadChunkBytes))
            if count > 0, let bodyTransform,
                !bodyTransform.transform(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]))
            {
                fileFailed = true
                return Int(CURL_READFUNC_ABORT)
            }
            if count >= 0 { return count }
            if errno == EINTR { continue }
            fileFailed = true
            return Int(CURL_READFUNC_ABORT)
        }
    }

    /// Moves the body file to `offset` from its start (libcurl sends the body again). A
    /// transformed body starts over from its start only.
    fileprivate func seekBody(to offset: curl_off_t, origin: Int32) -> Int32 {
        if let bodyTransform {
            guard offset == 0, origin == SEEK_SET else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
            guard bodyDescriptor >= 0, lseek(bodyDescriptor, 0, SEEK_SET) == 0, bodyTransform.restart() else {
                return Int32(CURL_SEEKFUNC_FAIL)
            }
            return Int32(CURL_SEEKFUNC_OK)
        }
        guard bodyDescriptor >= 0, lseek(bodyDescriptor, off_t(offset), origin) >= 0 else {
            return Int32(CURL_SEEKFUNC_FAIL)
        }
        return Int32(CURL_SEEKFUNC_OK)
    }

    /// Hands libcurl's counts to the request's progress sink; a cancelled transfer stops here.
    fileprivate func reportProgress(
        downloadTotal: curl_off_t, downloadNow: curl_off_t, uploadTotal: curl_off_t, uploadNow: curl_off_t
    ) -> Int32 {
        if cancelRequested.load(ordering: .relaxed) { return 1 }
        progress?.report(
            HTTPTransferCounts(
                sent: Int64(uploadNow), sendTotal: uploadTotal > 0 ? Int64(uploadTotal) : nil,
                received: Int64(downloadNow), receiveTotal: downloadTotal > 0 ? Int64(downloadTotal) : nil))
        return 0
    }

    fileprivate func receiveHeaderLine(_ bytes: UnsafeRawBufferPointer) -> Int {
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0D || bytes[end - 1] == 0x0A { end -= 1 }
        // Trimmed as bytes: "\r\n" is one Character, so Character-wise trimming would miss it.
        let line = Substring(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[..<end]), as: UTF8.self))
        if line.hasPrefix("HTTP/") {
            headers = HTTPHeaders()  // A new response (after 100 Continue or a redirect) starts.
            bodyGoesToFile = nil
        } else if let colon = line.firstIndex(of: ":") {
            let name = String(line[..<colon])
            let value = line[line.index(after: colon)...].trimmingPrefix { $0 == " " || $0 == "\t" }
            headers.add(name: name, value: String(value))
            if HTTPHeaders.equalNames(name, "Content-Length"), let length = Int(value), length > 0,
                responseDescriptor < 0
            {
                body.reserveCapacity(min(length, limit))
            }
        }
        return bytes.count
    }

    // MARK: Error mapping

    /// Maps a libcurl result to the SDK's error.
    static func map(_ code: CURLcode, limit: Int, exceededLimit: Bool) -> TransportError {
        switch code {
        case CURLE_WRITE_ERROR where exceededLimit, CURLE_FILESIZE_EXCEEDED:
            return .tooLarge(limit: limit)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .dnsFailure
        case CURLE_COULDNT_CONNECT:
            return .connectFailed
        case CURLE_OPERATION_TIMEDOUT:
            return .timedOut
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return .invalidURL
        case CURLE_ABORTED_BY_CALLBACK:
            return .cancelled
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ENGINE_NOTFOUND,
            CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED, CURLE_SSL_CLIENTCERT:
            return .tls
        case CURLE_GOT_NOTHING:
            return .emptyResponse
        case CURLE_PARTIAL_FILE:
            return .partialResponse
        case CURLE_SEND_ERROR, CURLE_RECV_ERROR:
            return .connectionLost
        default:
            let message = curl_easy_strerror(code).map { String(cString: $0) } ?? "unknown"
            return .other(code: Int(code.rawValue), message: message)
        }
    }
}

private func curlWriteCallback(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receiveBody(UnsafeRawBufferPointer(start: buffer, count: size * count))
}

private func curlHeaderCallback(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: buffer, count: size * count))
}

private func curlReadCallback(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return Int(CURL_READFUNC_ABORT) }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.readBody(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
}

private func curlSeekCallback(_ context: UnsafeMutableRawPointer?, _ offset: curl_off_t, _ origin: Int32) -> Int32 {
    guard let context else { return Int32(CURL_SEEKFUNC_FAIL) }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.seekBody(to: offset, origin: origin)
}

private func curlProgressCallback(
    _ context: UnsafeMutableRawPointer?, _ downloadTotal: curl_off_t, _ downloadNow: curl_off_t,
    _ uploadTotal: curl_off_t, _ uploadNow: curl_off_t
) -> Int32 {
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.reportProgress(
        downloadTotal: downloadTotal, downloadNow: downloadNow, uploadTotal: uploadTotal, uploadNow: uploadNow)
}
