#include "CMegolmBaseline.h"

#include <olm/olm.h>
#include <stdlib.h>
#include <string.h>

size_t megolm_baseline_decrypt(
    const uint8_t *session_key, size_t key_length, const uint8_t *messages, const size_t *offsets,
    const size_t *lengths, size_t count, uint64_t *checksum) {
    void *memory = malloc(olm_inbound_group_session_size());
    OlmInboundGroupSession *session = olm_inbound_group_session(memory);
    uint8_t *key = malloc(key_length);
    memcpy(key, session_key, key_length);
    size_t decrypted = 0;
    if (olm_init_inbound_group_session(session, key, key_length) != olm_error()) {
        size_t longest = 0;
        for (size_t i = 0; i < count; i++) {
            if (lengths[i] > longest) longest = lengths[i];
        }
        uint8_t *scratch = malloc(longest);
        uint8_t *plaintext = malloc(longest);
        uint64_t sum = 0;
        for (; decrypted < count; decrypted++) {
            size_t length = lengths[decrypted];
            memcpy(scratch, messages + offsets[decrypted], length);
            uint32_t index = 0;
            size_t written = olm_group_decrypt(session, scratch, length, plaintext, length, &index);
            if (written == olm_error()) break;
            sum += written + index + plaintext[0];
        }
        *checksum += sum;
        free(plaintext);
        free(scratch);
    }
    olm_clear_inbound_group_session(session);
    free(memory);
    free(key);
    return decrypted;
}
