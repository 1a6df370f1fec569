// The plain C baseline of `symorva-bench megolm`: libolm's Megolm decryption in a loop, with
// nothing of the SDK around it. Linked only by symorva-bench (Scripts/layering).
#ifndef CMEGOLM_BASELINE_H
#define CMEGOLM_BASELINE_H

#include <stddef.h>
#include <stdint.h>

/// Creates an inbound Megolm session from `session_key` (the base64 session key of an
/// outbound session at index 0) and decrypts `count` base64 ciphertexts, message `i` being
/// `messages[offsets[i] ..< offsets[i] + lengths[i]]`, in order. Each ciphertext is copied into
/// a scratch buffer first (libolm decodes its input in place) and decrypted into an output
/// buffer as long as the ciphertext (a plaintext is always shorter).
///
/// Returns the number of messages decrypted (`count` on success; fewer when one fails) and
/// adds the plaintext lengths, indices and first bytes to `*checksum`.
size_t megolm_baseline_decrypt(
    const uint8_t *session_key, size_t key_length, const uint8_t *messages, const size_t *offsets,
    const size_t *lengths, size_t count, uint64_t *checksum);

#endif
