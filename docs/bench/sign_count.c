/* One signature at a time under callgrind: the primitive beside the handshake's signing step
 * (docs/instructions.md). Loads a private key (PEM), signs a 130-byte message (the size of TLS
 * 1.3's CertificateVerify content: 64 spaces, the context string, a 48-byte transcript hash)
 * WARM times unmeasured, then N times, each (EVP_DigestSignInit_ex + EVP_DigestSign, as a TLS
 * stack does per handshake) between two callgrind dumps labelled "sign <i>".
 * Build and run: docs/bench/sign_count.sh KEY.pem [N] */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <valgrind/callgrind.h>

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s KEY.pem [N]\n", argv[0]); return 2; }
    int n = argc > 2 ? atoi(argv[2]) : 30, warm = 3;
    FILE *f = fopen(argv[1], "r");
    if (!f) { perror(argv[1]); return 1; }
    EVP_PKEY *key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    if (!key) { fprintf(stderr, "cannot read the key\n"); return 1; }
    unsigned char msg[130], sig[8192];
    memset(msg, 0x20, 64);
    memcpy(msg + 64, "TLS 1.3, server CertificateVerify", 33);
    for (int i = 97; i < 130; i++) msg[i] = (unsigned char)i;
    char label[32];
    for (int i = -warm; i < n; i++) {
        if (i >= 0) { snprintf(label, sizeof label, "start %d", i); CALLGRIND_DUMP_STATS_AT(label); }
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        size_t len = sizeof sig;
        const char *md = EVP_PKEY_is_a(key, "EC") ? "SHA256" : NULL;
        if (EVP_DigestSignInit_ex(ctx, NULL, md, NULL, NULL, key, NULL) != 1 ||
            EVP_DigestSign(ctx, sig, &len, msg, sizeof msg) != 1) { fprintf(stderr, "signing failed\n"); return 1; }
        EVP_MD_CTX_free(ctx);
        if (i >= 0) { snprintf(label, sizeof label, "sign %d", i); CALLGRIND_DUMP_STATS_AT(label); }
    }
    EVP_PKEY_free(key);
    return 0;
}
