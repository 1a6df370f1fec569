#ifndef SYMORVA_CCURLSHIM_H
#define SYMORVA_CCURLSHIM_H
#include <curl/curl.h>
/* Internal to the SDK, not API: hidden, so that a shared library the SDK is linked into
   (libSymorvaFFI.so) exports none of these (clients/python/tests/test_ffi_symbols.py). */
#pragma GCC visibility push(hidden)
/* Typed, non-variadic wrappers around curl_easy_setopt / curl_easy_getinfo /
   curl_multi_setopt: Swift cannot call C variadic functions. */
CURLcode symorva_curl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode symorva_curl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode symorva_curl_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode symorva_curl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value);
CURLcode symorva_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);

/* The signature libcurl expects for CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION. */
typedef size_t (*symorva_curl_data_callback)(char *buffer, size_t size, size_t count, void *context);
CURLcode symorva_curl_setopt_data_callback(CURL *handle, CURLoption option, symorva_curl_data_callback callback);
CURLcode symorva_curl_getinfo_offset(CURL *handle, CURLINFO info, curl_off_t *value);
CURLMcode symorva_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

/* CURLOPT_XFERINFOFUNCTION: transfer progress (return non-zero to abort). */
typedef int (*symorva_curl_xferinfo_callback)(void *context, curl_off_t download_total, curl_off_t download_now,
                                              curl_off_t upload_total, curl_off_t upload_now);
CURLcode symorva_curl_setopt_xferinfo_callback(CURL *handle, symorva_curl_xferinfo_callback callback);
/* CURLOPT_SEEKFUNCTION: rewinds a read-callback body when libcurl must send it again. */
typedef int (*symorva_curl_seek_callback)(void *context, curl_off_t offset, int origin);
CURLcode symorva_curl_setopt_seek_callback(CURL *handle, symorva_curl_seek_callback callback);
#pragma GCC visibility pop
#endif
