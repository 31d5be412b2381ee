/* The one security policy pqtls composes from s2n-tls' own preference lists, for the
 * configuration no named policy expresses: a client sending a lone X25519MLKEM768 key share
 * (no classical curve: s2n-tls' "null" curve list, as its policy `test_pq_only`) that offers and
 * verifies ML-DSA signatures (the signature list of its policies with ML-DSA,
 * `s2n_signature_preferences_20250512`).
 *
 * s2n-tls has no public API to build a policy; its internal `s2n_config_set_security_policy`
 * (the function `s2n_config_set_cipher_preferences` calls after looking a name up) takes one and
 * validates it as it does its named ones. This file is compiled against the internal headers
 * of the exact s2n-tls-sys version linked (build.rs), so the structure's layout is that
 * library's. Every client handshake checks its own ClientHello on the wire against the
 * request (crates/pqtls-s2n/src/lib.rs, check_client_hello). */

#include "tls/s2n_security_policies.h"

int s2n_config_set_security_policy(struct s2n_config *config, const struct s2n_security_policy *security_policy);

static const struct s2n_security_policy pqtls_pq_only_mldsa = {
    .minimum_protocol_version = S2N_TLS13,
    .cipher_preferences = &cipher_preferences_cloudfront_upstream_2025_08_08_tls13,
    .kem_preferences = &kem_preferences_all,
    .signature_preferences = &s2n_signature_preferences_20250512,
    .certificate_signature_preferences = &s2n_signature_preferences_20250512,
    .ecc_preferences = &s2n_ecc_preferences_null,
    .rules = {
            [S2N_PERFECT_FORWARD_SECRECY] = true,
    },
};

/* Sets that policy on `config` (0 on success, -1 with s2n's error set otherwise). */
int pqtls_s2n_config_set_pq_only_mldsa(struct s2n_config *config)
{
    return s2n_config_set_security_policy(config, &pqtls_pq_only_mldsa);
}
