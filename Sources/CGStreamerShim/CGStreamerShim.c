#if defined(__linux__)
#define GST_USE_UNSTABLE_API 1
#include <string.h>
#include <gst/gst.h>
#include <gst/sdp/sdp.h>
#include <gst/webrtc/webrtc.h>
#include "CGStreamerShim.h"

int symorva_gst_initialize(void) {
    static gsize once = 0;
    if (g_once_init_enter(&once)) {
        gst_init(NULL, NULL);
        g_once_init_leave(&once, 1);
    }
    return symorva_gst_has_element("webrtcbin") && symorva_gst_has_element("nicesrc")
        && symorva_gst_has_element("opusenc") && symorva_gst_has_element("opusdec")
        && symorva_gst_has_element("rtpopuspay") && symorva_gst_has_element("rtpopusdepay");
}

int symorva_gst_has_element(const char *factory) {
    GstElementFactory *found = gst_element_factory_find(factory);
    if (found == NULL) return 0;
    gst_object_unref(found);
    return 1;
}

typedef struct {
    symorva_invoke_callback body;
    void *context;
} invocation;

/* GLib hands an invocation to the loop's thread through its own locks, which on Linux are futexes
 * that ThreadSanitizer cannot see: it would report the invocation (and what the caller wrote before
 * posting it) as a race. The body pointer is therefore published with a release store after
 * everything else is written and read with an acquire load first, a happens-before that
 * ThreadSanitizer sees (and that costs nothing GLib's locks did not already order). */
static gboolean run_invocation(gpointer data) {
    invocation *call = data;
    symorva_invoke_callback body = __atomic_load_n(&call->body, __ATOMIC_ACQUIRE);
    body(call->context);
    return G_SOURCE_REMOVE;
}

void symorva_glib_invoke(GMainContext *main_context, symorva_invoke_callback body, void *context) {
    invocation *call = g_new0(invocation, 1);
    call->context = context;
    __atomic_store_n(&call->body, body, __ATOMIC_RELEASE);
    g_main_context_invoke_full(main_context, G_PRIORITY_DEFAULT, run_invocation, call, g_free);
}

typedef struct {
    void *context;
    GstElement *receiver;
    symorva_webrtc_event_callback negotiation_needed;
    symorva_webrtc_ice_candidate_callback ice_candidate;
    symorva_webrtc_state_callback ice_connection_state;
    symorva_webrtc_state_callback ice_gathering_state;
} webrtc_handlers;

static void on_negotiation_needed(GstElement *webrtc, gpointer data) {
    (void)webrtc;
    webrtc_handlers *handlers = data;
    handlers->negotiation_needed(handlers->context);
}

static void on_ice_candidate(GstElement *webrtc, guint mline, gchar *candidate, gpointer data) {
    (void)webrtc;
    webrtc_handlers *handlers = data;
    handlers->ice_candidate(handlers->context, mline, candidate);
}

static void on_ice_connection_state(GObject *webrtc, GParamSpec *spec, gpointer data) {
    (void)spec;
    webrtc_handlers *handlers = data;
    GstWebRTCICEConnectionState state = GST_WEBRTC_ICE_CONNECTION_STATE_NEW;
    g_object_get(webrtc, "ice-connection-state", &state, NULL);
    handlers->ice_connection_state(handlers->context, (int)state);
}

static void on_ice_gathering_state(GObject *webrtc, GParamSpec *spec, gpointer data) {
    (void)spec;
    webrtc_handlers *handlers = data;
    GstWebRTCICEGatheringState state = GST_WEBRTC_ICE_GATHERING_STATE_NEW;
    g_object_get(webrtc, "ice-gathering-state", &state, NULL);
    handlers->ice_gathering_state(handlers->context, (int)state);
}

static void on_pad_added(GstElement *webrtc, GstPad *pad, gpointer data) {
    (void)webrtc;
    webrtc_handlers *handlers = data;
    if (GST_PAD_DIRECTION(pad) != GST_PAD_SRC) return;
    GstPad *sink = gst_element_get_static_pad(handlers->receiver, "sink");
    if (sink == NULL) return;
    if (!gst_pad_is_linked(sink)) gst_pad_link(pad, sink);
    gst_object_unref(sink);
}

static void free_handlers(gpointer data, GClosure *closure) {
    (void)closure;
    webrtc_handlers *handlers = data;
    gst_object_unref(handlers->receiver);
    g_free(handlers);
}

void symorva_webrtc_connect(
    GstElement *webrtc, GstElement *receiver, void *context, symorva_webrtc_event_callback negotiation_needed,
    symorva_webrtc_ice_candidate_callback ice_candidate, symorva_webrtc_state_callback ice_connection_state,
    symorva_webrtc_state_callback ice_gathering_state) {
    webrtc_handlers *handlers = g_new0(webrtc_handlers, 1);
    handlers->context = context;
    handlers->receiver = gst_object_ref(receiver);
    handlers->negotiation_needed = negotiation_needed;
    handlers->ice_candidate = ice_candidate;
    handlers->ice_connection_state = ice_connection_state;
    handlers->ice_gathering_state = ice_gathering_state;
    /* One closure owns the handlers (freed with the element); the others borrow them. */
    g_signal_connect_data(webrtc, "pad-added", G_CALLBACK(on_pad_added), handlers, free_handlers, 0);
    g_signal_connect(webrtc, "on-negotiation-needed", G_CALLBACK(on_negotiation_needed), handlers);
    g_signal_connect(webrtc, "on-ice-candidate", G_CALLBACK(on_ice_candidate), handlers);
    g_signal_connect(webrtc, "notify::ice-connection-state", G_CALLBACK(on_ice_connection_state), handlers);
    g_signal_connect(webrtc, "notify::ice-gathering-state", G_CALLBACK(on_ice_gathering_state), handlers);
}

typedef struct {
    GstElement *webrtc;
    void *context;
    symorva_webrtc_text_callback done;
} promise_call;

static promise_call *new_promise_call(GstElement *webrtc, void *context, symorva_webrtc_text_callback done) {
    promise_call *call = g_new0(promise_call, 1);
    call->webrtc = gst_object_ref(webrtc);
    call->context = context;
    call->done = done;
    return call;
}

static void free_promise_call(gpointer data) {
    promise_call *call = data;
    gst_object_unref(call->webrtc);
    g_free(call);
}

static void on_offer_created(GstPromise *promise, gpointer data) {
    promise_call *call = data;
    GstWebRTCSessionDescription *offer = NULL;
    if (gst_promise_wait(promise) == GST_PROMISE_RESULT_REPLIED) {
        const GstStructure *reply = gst_promise_get_reply(promise);
        if (reply != NULL) gst_structure_get(reply, "offer", GST_TYPE_WEBRTC_SESSION_DESCRIPTION, &offer, NULL);
    }
    gst_promise_unref(promise);
    if (offer == NULL) {
        call->done(call->context, NULL);
        return;
    }
    g_signal_emit_by_name(call->webrtc, "set-local-description", offer, NULL);
    gchar *text = gst_sdp_message_as_text(offer->sdp);
    call->done(call->context, text);
    g_free(text);
    gst_webrtc_session_description_free(offer);
}

void symorva_webrtc_create_offer(GstElement *webrtc, void *context, symorva_webrtc_text_callback done) {
    promise_call *call = new_promise_call(webrtc, context, done);
    GstPromise *promise = gst_promise_new_with_change_func(on_offer_created, call, free_promise_call);
    g_signal_emit_by_name(webrtc, "create-offer", NULL, promise);
}

static void on_remote_set(GstPromise *promise, gpointer data) {
    promise_call *call = data;
    const char *failure = NULL;
    if (gst_promise_wait(promise) != GST_PROMISE_RESULT_REPLIED) {
        failure = "not replied";
    } else {
        const GstStructure *reply = gst_promise_get_reply(promise);
        if (reply != NULL && gst_structure_has_field(reply, "error")) failure = "refused";
    }
    gst_promise_unref(promise);
    call->done(call->context, failure);
}

void symorva_webrtc_set_remote_answer(
    GstElement *webrtc, const char *sdp, void *context, symorva_webrtc_text_callback done) {
    GstSDPMessage *message = NULL;
    if (gst_sdp_message_new_from_text(sdp, &message) != GST_SDP_OK || message == NULL) {
        done(context, "unreadable SDP");
        return;
    }
    GstWebRTCSessionDescription *answer = gst_webrtc_session_description_new(GST_WEBRTC_SDP_TYPE_ANSWER, message);
    promise_call *call = new_promise_call(webrtc, context, done);
    GstPromise *promise = gst_promise_new_with_change_func(on_remote_set, call, free_promise_call);
    g_signal_emit_by_name(webrtc, "set-remote-description", answer, promise);
    gst_webrtc_session_description_free(answer);
}

void symorva_webrtc_add_ice_candidate(GstElement *webrtc, unsigned int mline, const char *candidate) {
    const char *line = strncmp(candidate, "a=", 2) == 0 ? candidate + 2 : candidate;
    g_signal_emit_by_name(webrtc, "add-ice-candidate", mline, line);
}

typedef struct {
    void *context;
    symorva_pcm_callback callback;
} pcm_tap;

static GstPadProbeReturn on_pcm_buffer(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
    (void)pad;
    pcm_tap *tap = data;
    /* Published by symorva_pcm_tap with release stores. GStreamer's pad lock orders them too,
     * but ThreadSanitizer cannot see GLib's futex-based locks, so the hand-over is atomic. */
    symorva_pcm_callback callback = __atomic_load_n(&tap->callback, __ATOMIC_ACQUIRE);
    void *context = __atomic_load_n(&tap->context, __ATOMIC_ACQUIRE);
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    GstMapInfo map;
    if (callback != NULL && buffer != NULL && gst_buffer_map(buffer, &map, GST_MAP_READ)) {
        uint64_t pts = GST_BUFFER_PTS_IS_VALID(buffer) ? GST_BUFFER_PTS(buffer) : 0;
        callback(context, (const int16_t *)map.data, map.size / sizeof(int16_t), pts);
        gst_buffer_unmap(buffer, &map);
    }
    return GST_PAD_PROBE_OK;
}

void symorva_pcm_tap(GstElement *element, void *context, symorva_pcm_callback callback) {
    GstPad *sink = gst_element_get_static_pad(element, "sink");
    if (sink == NULL) return;
    pcm_tap *tap = g_new0(pcm_tap, 1);
    __atomic_store_n(&tap->context, context, __ATOMIC_RELEASE);
    __atomic_store_n(&tap->callback, callback, __ATOMIC_RELEASE);
    gst_pad_add_probe(sink, GST_PAD_PROBE_TYPE_BUFFER, on_pcm_buffer, tap, g_free);
    gst_object_unref(sink);
}

typedef struct {
    void *context;
    symorva_bus_callback callback;
} bus_watch;

static gboolean on_bus_message(GstBus *bus, GstMessage *message, gpointer data) {
    (void)bus;
    bus_watch *watch = data;
    switch (GST_MESSAGE_TYPE(message)) {
    case GST_MESSAGE_ERROR: {
        GError *error = NULL;
        gst_message_parse_error(message, &error, NULL);
        watch->callback(watch->context, 1, error != NULL ? error->message : "error");
        if (error != NULL) g_error_free(error);
        break;
    }
    case GST_MESSAGE_EOS:
        watch->callback(watch->context, 2, "end of stream");
        break;
    default:
        break;
    }
    return G_SOURCE_CONTINUE;
}

unsigned int symorva_bus_watch(
    GstElement *pipeline, GMainContext *main_context, void *context, symorva_bus_callback callback) {
    GstBus *bus = gst_element_get_bus(pipeline);
    GSource *source = gst_bus_create_watch(bus);
    bus_watch *watch = g_new0(bus_watch, 1);
    watch->context = context;
    watch->callback = callback;
    g_source_set_callback(source, (GSourceFunc)(void (*)(void))on_bus_message, watch, g_free);
    unsigned int id = g_source_attach(source, main_context);
    g_source_unref(source);
    gst_object_unref(bus);
    return id;
}
int symorva_appsrc_push(GstElement *appsrc, const uint8_t *bytes, size_t count) {
    GstBuffer *buffer = gst_buffer_new_allocate(NULL, count, NULL);
    if (buffer == NULL) return 0;
    gst_buffer_fill(buffer, 0, bytes, count);
    GstFlowReturn result = GST_FLOW_ERROR;
    g_signal_emit_by_name(appsrc, "push-buffer", buffer, &result);
    gst_buffer_unref(buffer);
    return result == GST_FLOW_OK;
}

void symorva_appsrc_end(GstElement *appsrc) {
    GstFlowReturn result = GST_FLOW_ERROR;
    g_signal_emit_by_name(appsrc, "end-of-stream", &result);
}
/* A thumbnail of the image file at `path`: decoded (decodebin), scaled to fit max_width ×
 * max_height with its aspect kept (videoscale fixates the other side), JPEG-encoded, and taken
 * from the appsink's preroll — no main loop, no file written. Blocks for at most timeout_ms. On
 * success (0) *bytes is a g_malloc'd buffer of *count bytes (free with symorva_thumbnail_free).
 * 1: a needed element is missing; 2: the file is not a decodable image (or the pipeline failed);
 * 3: timed out. */
int symorva_image_thumbnail(
    const char *path, int max_width, int max_height, int quality, int png, unsigned int timeout_ms,
    uint8_t **bytes, size_t *count, int *width, int *height, int *source_width, int *source_height,
    int64_t *duration_ns) {
    *bytes = NULL;
    *count = 0;
    *source_width = 0;
    *source_height = 0;
    *duration_ns = -1;
    symorva_gst_initialize();
    static const char *needed[] = {"filesrc", "decodebin", "videoconvert", "videoscale", "appsink"};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        if (!symorva_gst_has_element(needed[i])) return 1;
    }
    if (!symorva_gst_has_element(png ? "pngenc" : "jpegenc")) return 1;
    GError *error = NULL;
    GstElement *pipeline = gst_parse_launch(
        png ? "filesrc name=src ! decodebin ! videoconvert name=convert ! videoscale ! capsfilter name=size ! "
              "pngenc name=enc ! appsink name=sink sync=false max-buffers=1"
            : "filesrc name=src ! decodebin ! videoconvert name=convert ! videoscale ! capsfilter name=size ! "
              "jpegenc name=enc ! appsink name=sink sync=false max-buffers=1",
        &error);
    if (pipeline == NULL || error != NULL) {
        if (error != NULL) g_error_free(error);
        if (pipeline != NULL) gst_object_unref(pipeline);
        return 2;
    }
    GstElement *source = gst_bin_get_by_name(GST_BIN(pipeline), "src");
    GstElement *convert = gst_bin_get_by_name(GST_BIN(pipeline), "convert");
    GstElement *size = gst_bin_get_by_name(GST_BIN(pipeline), "size");
    GstElement *encoder = gst_bin_get_by_name(GST_BIN(pipeline), "enc");
    GstElement *sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
    int result = 2;
    if (source != NULL && convert != NULL && size != NULL && encoder != NULL && sink != NULL) {
        g_object_set(source, "location", path, NULL);
        if (!png) g_object_set(encoder, "quality", quality, NULL);
        GstCaps *caps = gst_caps_new_simple(
            "video/x-raw", "pixel-aspect-ratio", GST_TYPE_FRACTION, 1, 1, "width", GST_TYPE_INT_RANGE, 1,
            max_width, "height", GST_TYPE_INT_RANGE, 1, max_height, NULL);
        g_object_set(size, "caps", caps, NULL);
        gst_caps_unref(caps);
        GstBus *bus = gst_element_get_bus(pipeline);
        if (gst_element_set_state(pipeline, GST_STATE_PAUSED) != GST_STATE_CHANGE_FAILURE) {
            GstMessage *message = gst_bus_timed_pop_filtered(
                bus, (GstClockTime)timeout_ms * GST_MSECOND, GST_MESSAGE_ASYNC_DONE | GST_MESSAGE_ERROR);
            if (message == NULL) {
                result = 3;
            } else {
                if (GST_MESSAGE_TYPE(message) == GST_MESSAGE_ASYNC_DONE) {
                    GstSample *sample = NULL;
                    g_signal_emit_by_name(sink, "pull-preroll", &sample);
                    if (sample != NULL) {
                        GstBuffer *buffer = gst_sample_get_buffer(sample);
                        GstCaps *encoded = gst_sample_get_caps(sample);
                        GstMapInfo map;
                        if (buffer != NULL && encoded != NULL && gst_caps_get_size(encoded) > 0
                            && gst_buffer_map(buffer, &map, GST_MAP_READ)) {
                            GstStructure *structure = gst_caps_get_structure(encoded, 0);
                            if (map.size > 0 && gst_structure_get_int(structure, "width", width)
                                && gst_structure_get_int(structure, "height", height)) {
                                *bytes = g_memdup2(map.data, map.size);
                                *count = map.size;
                                result = 0;
                                // The decoded size (before scaling) and, for a video, its length.
                                GstPad *decoded = gst_element_get_static_pad(convert, "sink");
                                GstCaps *input = decoded != NULL ? gst_pad_get_current_caps(decoded) : NULL;
                                if (input != NULL && gst_caps_get_size(input) > 0) {
                                    GstStructure *in = gst_caps_get_structure(input, 0);
                                    gst_structure_get_int(in, "width", source_width);
                                    gst_structure_get_int(in, "height", source_height);
                                }
                                if (input != NULL) gst_caps_unref(input);
                                if (decoded != NULL) gst_object_unref(decoded);
                                gint64 length = -1;
                                if (gst_element_query_duration(pipeline, GST_FORMAT_TIME, &length) && length > 0) {
                                    *duration_ns = length;
                                }
                            }
                            gst_buffer_unmap(buffer, &map);
                        }
                        gst_sample_unref(sample);
                    }
                }
                gst_message_unref(message);
            }
        }
        gst_element_set_state(pipeline, GST_STATE_NULL);
        gst_object_unref(bus);
    }
    if (source != NULL) gst_object_unref(source);
    if (convert != NULL) gst_object_unref(convert);
    if (size != NULL) gst_object_unref(size);
    if (encoder != NULL) gst_object_unref(encoder);
    if (sink != NULL) gst_object_unref(sink);
    gst_object_unref(pipeline);
    return result;
}

void symorva_thumbnail_free(uint8_t *bytes) { g_free(bytes); }
#endif
