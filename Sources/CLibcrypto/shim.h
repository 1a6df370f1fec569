// OpenSSL's libcrypto, owned by SymorvaCipher (docs/adapters.md). Only the EVP, HMAC, KDF and
// RAND interfaces: no deprecated 1.1 API is exposed to Swift.
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/obj_mac.h>
#include <openssl/rand.h>
