/*
 * header_check.c — include/symorva.h is true: this program, compiled against the header alone
 * (-std=c11 -Wall -Wextra -Werror -pedantic) and linked with libSymorvaFFI, calls every function
 * the header declares with the header's types and checks what the header promises of each.
 * clients/python/tests/test_ffi_symbols.py builds and runs it.
 *
 *     header_check [MANIFEST DATA_DIRECTORY]
 *
 * With a manifest, it also creates a client, sends a request, receives its answer by id,
 * destroys the client and checks that the destroyed id is refused.
 */
#include "symorva.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(condition)                                                   \
    do {                                                                   \
        if (!(condition)) {                                                \
            fprintf(stderr, "header_check: %s:%d: %s\n", __FILE__, __LINE__, #condition); \
            failures++;                                                    \
        }                                                                  \
    } while (0)

static void count_line(int level, const char *message, void *context) {
    CHECK(level >= SYMORVA_LOG_TRACE && level <= SYMORVA_LOG_ERROR);
    CHECK(message != NULL);
    ++*(int *)context;
}

int main(int argc, char **argv) {
    /* symorva_execute needs no client; its answer is the caller's, released with symorva_free. */
    char *answer = symorva_execute("{\"id\": 1, \"method\": \"message.split\", \"params\": {\"text\": \"ab cd\", \"limit\": 3}}");
    CHECK(answer != NULL && strstr(answer, "\"parts\"") != NULL && strstr(answer, "\"id\":1") != NULL);
    symorva_free(answer);
    answer = symorva_execute("{\"id\": 2, \"method\": \"chat.refresh\"}");
    CHECK(answer != NULL && strstr(answer, "methodNotFound") != NULL);
    symorva_free(answer);
    symorva_free(NULL);

    /* The status codes of the header. */
    CHECK(symorva_client_create(NULL, NULL) == SYMORVA_ERROR_INVALID_ARGUMENT);
    CHECK(symorva_client_create("/nonexistent/symorva/manifest.json", "/tmp") == SYMORVA_ERROR_INVALID_MANIFEST);
    CHECK(symorva_client_send(987654, "{}") == SYMORVA_ERROR_NO_CLIENT);
    CHECK(symorva_client_receive(987654, 0) == NULL);
    symorva_client_destroy(987654);

    int lines = 0;
    symorva_set_log_level(SYMORVA_LOG_TRACE);
    symorva_set_log_callback(count_line, &lines);

    if (argc == 3) {
        int client = symorva_client_create(argv[1], argv[2]);
        CHECK(client > 0);
        CHECK(symorva_client_send(client, NULL) == SYMORVA_ERROR_INVALID_ARGUMENT);
        CHECK(symorva_client_send(client, "{\"id\": \"c-1\", \"method\": \"contract.methods\"}") == SYMORVA_OK);
        char *message = NULL;
        for (int attempt = 0; attempt < 100 && message == NULL; attempt++) message = symorva_client_receive(client, 0.5);
        CHECK(message != NULL && strstr(message, "\"id\":\"c-1\"") != NULL && strstr(message, "session.signIn") != NULL);
        symorva_free(message);
        symorva_client_destroy(client);
        symorva_client_destroy(client); /* twice is harmless */
        CHECK(symorva_client_send(client, "{\"id\": 2, \"method\": \"contract.methods\"}") == SYMORVA_ERROR_NO_CLIENT);
        CHECK(symorva_client_receive(client, 0) == NULL);
        int again = symorva_client_create(argv[1], argv[2]);
        CHECK(again > client); /* ids are never reused */
        symorva_client_destroy(again);
        CHECK(lines > 0);
    }

    symorva_set_log_callback(NULL, NULL);
    symorva_set_log_level(SYMORVA_LOG_NONE);
    if (failures == 0) printf("header_check: ok\n");
    return failures == 0 ? 0 : 1;
}
