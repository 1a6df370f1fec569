#include <curl/curl.h>
#include "CCurlShim.h"
CURLcode symorva_curl_setopt_long(CURL *handle, CURLoption option, long value) { return curl_easy_setopt(handle, option, value); }
CURLcode symorva_curl_setopt_string(CURL *handle, CURLoption option, const char *value) { return curl_easy_setopt(handle, option, value); }
CURLcode symorva_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) { return curl_easy_setopt(handle, option, value); }
CURLcode symorva_curl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) { return curl_easy_setopt(handle, option, value); }
CURLcode symorva_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) { return curl_easy_getinfo(handle, info, value); }
CURLcode symorva_curl_setopt_data_callback(CURL *handle, CURLoption option, symorva_curl_data_callback callback) { return curl_easy_setopt(handle, option, callback); }
CURLcode symorva_curl_getinfo_offset(CURL *handle, CURLINFO info, curl_off_t *value) { return curl_easy_getinfo(handle, info, value); }
CURLMcode symorva_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) { return curl_multi_setopt(multi, option, value); }
CURLcode symorva_curl_setopt_xferinfo_callback(CURL *handle, symorva_curl_xferinfo_callback callback) { return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback); }
CURLcode symorva_curl_setopt_seek_callback(CURL *handle, symorva_curl_seek_callback callback) { return curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, callback); }
