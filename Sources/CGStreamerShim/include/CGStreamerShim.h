#ifndef SYMORVA_CGSTREAMERSHIM_H
#define SYMORVA_CGSTREAMERSHIM_H
/* What Swift cannot call directly in GStreamer and GLib: signals (g_signal_emit_by_name and
   g_signal_connect are variadic or macros), promises with their reply structures, the
   webrtcbin session descriptions, pad probes and bus watches. Every callback receives the
   `context` pointer it was registered with; none of them runs on the thread that registered it. */
#if defined(__linux__)
#include <stddef.h>
#include <stdint.h>
#include <glib.h>
#include <gst/gst.h>
/* Internal to the SDK, not API: hidden, so that a shared library the SDK is linked into
   (libSymorvaFFI.so) exports none of these (clients/python/tests/test_ffi_symbols.py). */
#pragma GCC visibility push(hidden)

/* Initialises GStreamer once (idempotent). Returns 1 when webrtcbin, nice and opus are usable. */
int symorva_gst_initialize(void);
/* Whether an element factory of that name is installed. */
int symorva_gst_has_element(const char *factory);

/* Runs `body(context)` once on the main loop of `main_context`. */
typedef void (*symorva_invoke_callback)(void *context);
void symorva_glib_invoke(GMainContext *main_context, symorva_invoke_callback body, void *context);

/* webrtcbin signals. `text` is only valid during the call. */
typedef void (*symorva_webrtc_ice_candidate_callback)(void *context, unsigned int mline, const char *candidate);
typedef void (*symorva_webrtc_state_callback)(void *context, int state);
typedef void (*symorva_webrtc_text_callback)(void *context, const char *text_or_null);
typedef void (*symorva_webrtc_event_callback)(void *context);

/* Connects on-negotiation-needed, on-ice-candidate, notify::ice-connection-state and
   notify::ice-gathering-state; links every new src pad of `webrtc` to `receiver`'s sink pad. */
void symorva_webrtc_connect(
    GstElement *webrtc, GstElement *receiver, void *context, symorva_webrtc_event_callback negotiation_needed,
    symorva_webrtc_ice_candidate_callback ice_candidate, symorva_webrtc_state_callback ice_connection_state,
    symorva_webrtc_state_callback ice_gathering_state);
/* Creates an offer, sets it as the local description, and calls back with its SDP (NULL on failure). */
void symorva_webrtc_create_offer(GstElement *webrtc, void *context, symorva_webrtc_text_callback done);
/* Sets `sdp` as the remote answer; calls back with NULL on success, a short reason otherwise. */
void symorva_webrtc_set_remote_answer(
    GstElement *webrtc, const char *sdp, void *context, symorva_webrtc_text_callback done);
/* Adds a remote ICE candidate (an SDP `candidate:` line, with or without the `a=` prefix). */
void symorva_webrtc_add_ice_candidate(GstElement *webrtc, unsigned int mline, const char *candidate);

/* Calls back with every buffer of interleaved 16-bit samples that reaches `element`'s sink pad. */
typedef void (*symorva_pcm_callback)(void *context, const int16_t *samples, size_t count, uint64_t pts_ns);
void symorva_pcm_tap(GstElement *element, void *context, symorva_pcm_callback callback);

/* Watches `pipeline`'s bus on `main_context`: calls back with 1 for an error (its message
   text), 2 for end of stream. Returns the watch's source ID. */
typedef void (*symorva_bus_callback)(void *context, int kind, const char *text);
unsigned int symorva_bus_watch(GstElement *pipeline, GMainContext *main_context, void *context, symorva_bus_callback callback);
/* Pushes a copy of `bytes` into an appsrc ("push-buffer"); returns 1 when the appsrc took it. */
int symorva_appsrc_push(GstElement *appsrc, const uint8_t *bytes, size_t count);
/* Tells an appsrc that no more data comes ("end-of-stream"). */
void symorva_appsrc_end(GstElement *appsrc);

/* A thumbnail of the image or video file at `path` (a video's first frame) that fits
   max_width x max_height (aspect kept), JPEG (`png` 0, at `quality`) or PNG with its alpha kept
   (`png` 1), made without a main loop or a file; blocks for at most timeout_ms. 0: *bytes (free it
   with symorva_thumbnail_free) holds *count bytes of *width x *height pixels, the source is
   *source_width x *source_height and lasts *duration_ns (-1 when it has no length: an image);
   1: an element is missing; 2: not an image or video GStreamer decodes; 3: timed out. */
int symorva_image_thumbnail(
    const char *path, int max_width, int max_height, int quality, int png, unsigned int timeout_ms,
    uint8_t **bytes, size_t *count, int *width, int *height, int *source_width, int *source_height,
    int64_t *duration_ns);
/* Frees a thumbnail's bytes. */
void symorva_thumbnail_free(uint8_t *bytes);
#pragma GCC visibility pop
#endif /* __linux__ */
#endif
