/*
 * symorva.h — the Symorva client SDK from any language: a C interface that carries JSON.
 *
 * Link with libSymorvaFFI (`swift build --product SymorvaFFI`). The protocol — requests,
 * answers, updates, host requests, errors — is described in docs/contract.md and declared in
 * contract/symorva.d.ts; this header only moves its JSON text.
 *
 * A client is one community (built from a manifest) with its accounts in a data folder. Send it
 * requests ({"id": 1, "method": "session.signIn", "params": {...}}); receive its messages
 * (answers carrying the request's id, subscription updates, host requests such as the consent
 * sheet and PIN entry, and {"closed": true} last).
 *
 * Threads: every function may be called from any thread. `symorva_client_receive` may be called
 * by several threads at once for the same client: each message goes to exactly one of them, in
 * order. `symorva_client_send` never blocks on the network. `symorva_client_create` and
 * `symorva_client_destroy` block the calling thread (launching restores the last account from
 * the data folder; destroying shuts every session down) — never call them from a callback.
 *
 * Memory: every `const char *` argument is UTF-8 text owned by the caller and only read during
 * the call. Every `char *` returned is owned by the caller and must be released with
 * `symorva_free` (never `free`). No pointer into the SDK's memory is ever handed out.
 *
 * Secrets: passwords and PINs travel inside requests; the SDK never writes a parameter, a
 * password, a PIN or a message body to its log.
 *
 * Symbols: the eight functions below are the API, and the only `symorva_` symbols the library
 * exports (the SDK's C shims for curl and GStreamer are hidden). clients/python/tests/
 * test_ffi_symbols.py checks that with `nm -D` and builds clients/c/header_check.c against this
 * header alone.
 */
#ifndef SYMORVA_H
#define SYMORVA_H

#ifdef __cplusplus
extern "C" {
#endif

/* Returned by symorva_client_create and symorva_client_send. */
#define SYMORVA_OK 0
/* No client with this id: never created, or already destroyed. */
#define SYMORVA_ERROR_NO_CLIENT (-1)
/* The manifest cannot be read or used, or the data folder is unusable. */
#define SYMORVA_ERROR_INVALID_MANIFEST (-2)
/* An argument is NULL (or not UTF-8). */
#define SYMORVA_ERROR_INVALID_ARGUMENT (-3)

/* Log levels (symorva_set_log_level, the callback's `level`). */
#define SYMORVA_LOG_TRACE 0
#define SYMORVA_LOG_DEBUG 1
#define SYMORVA_LOG_INFO 2
#define SYMORVA_LOG_NOTICE 3
#define SYMORVA_LOG_WARNING 4
#define SYMORVA_LOG_ERROR 5
#define SYMORVA_LOG_NONE 6

/*
 * Creates a client from the community manifest at `manifest_path`, keeping its accounts in
 * `data_directory` (created when missing), and restores the last signed-in account (no network).
 * Returns the client's id (> 0), or SYMORVA_ERROR_INVALID_MANIFEST / SYMORVA_ERROR_INVALID_ARGUMENT.
 * Ids are never reused within a process.
 */
int symorva_client_create(const char *manifest_path, const char *data_directory);

/*
 * Sends one request (a JSON object). Returns SYMORVA_OK — the answer, a result or a typed error,
 * comes through symorva_client_receive, also when the request is not JSON or names no method —
 * or SYMORVA_ERROR_NO_CLIENT after destroy, SYMORVA_ERROR_INVALID_ARGUMENT for NULL.
 */
int symorva_client_send(int client_id, const char *request);

/*
 * The client's next message, waiting up to `timeout` seconds (0 does not wait). Returns a JSON
 * text the caller frees with symorva_free, or NULL when nothing came in time, when the client is
 * closed and drained, or when there is no such client.
 */
char *symorva_client_receive(int client_id, double timeout);

/*
 * Runs a synchronous request at once on the calling thread and returns its answer (free it with
 * symorva_free): `message.split` (the long-message rule) and `amount.parse`. Needs no client.
 * Any other method is answered with the error `contract.methodNotFound`.
 */
char *symorva_execute(const char *request);

/*
 * Destroys a client: requests in flight are cancelled, every session stops, and
 * {"closed": true} becomes the last message; receivers waiting are woken. Messages not yet
 * received are dropped. Later calls with this id get SYMORVA_ERROR_NO_CLIENT (send) or NULL
 * (receive). Destroying twice is harmless.
 */
void symorva_client_destroy(int client_id);

/* Releases a string returned by this library. NULL is ignored. */
void symorva_free(char *text);

/* Log lines below `level` are dropped (default SYMORVA_LOG_WARNING); applies to every client. */
void symorva_set_log_level(int level);

/*
 * Sets (or with NULL removes) the function that receives log lines of every client: `level`,
 * the line (UTF-8, valid only during the call), and `context` as given. Called on the SDK's
 * threads, possibly several at once: it must return quickly and must not call back into this
 * library. Without a callback, lines go nowhere.
 */
typedef void (*symorva_log_callback)(int level, const char *message, void *context);
void symorva_set_log_callback(symorva_log_callback callback, void *context);

#ifdef __cplusplus
}
#endif

#endif /* SYMORVA_H */
