#ifndef SYMORVA_CCURLSHIM_H
#define SYMORVA_CCURLSHIM_H
#include <curl/curl.h>
/* Typed, non-variadic wrappers around curl_easy_setopt / curl_easy_getinfo:
   Swift cannot call C variadic functions. */
CURLcode symorva_curl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode symorva_curl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode symorva_curl_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode symorva_curl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value);
CURLcode symorva_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);
#endif
