//! One handshake configuration: the factors of an experiment, resolved against the catalogue
//! and validated for a stack before anything runs.

use crate::catalogue::{self, CertCompression, Cipher, CodepointOverrides, Group, SigAlg, Stack};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A certificate chain: leaf, an optional intermediate, and a root (`leaf[:intermediate]:root`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainSpec {
    pub leaf: &'static SigAlg,
    pub intermediate: Option<&'static SigAlg>,
    pub root: &'static SigAlg,
}

impl ChainSpec {
    /// Parses `leaf:root` or `leaf:intermediate:root`; a single name means a self-issued
    /// pair `alg:alg`.
    pub fn parse(spec: &str) -> Result<ChainSpec> {
        let parts: Vec<&str> = spec.split(':').map(str::trim).collect();
        if parts.len() > 3 {
            return Err(Error::Invalid(format!(
                "chain '{spec}' has {} parts; write leaf:root or leaf:intermediate:root, e.g. p256:p256 or mldsa65:mldsa65:mldsa87",
                parts.len()
            )));
        }
        let algs = parts.iter().map(|p| catalogue::sig_alg(p)).collect::<Result<Vec<_>>>()?;
        for a in &algs {
            if !a.certificates {
                return Err(Error::Unsupported(format!("'{}' cannot be used in certificates", a.name)));
            }
        }
        match algs.as_slice() {
            [one] => Ok(ChainSpec { leaf: one, intermediate: None, root: one }),
            [leaf, root] => Ok(ChainSpec { leaf, intermediate: None, root }),
            [leaf, int, root] => Ok(ChainSpec { leaf, intermediate: Some(int), root }),
            _ => Err(Error::Invalid(format!("chain '{spec}' is empty; write leaf:root, e.g. p256:p256"))),
        }
    }

    /// Certificates from leaf to root.
    pub fn algs(&self) -> Vec<&'static SigAlg> {
        let mut v = vec![self.leaf];
        v.extend(self.intermediate);
        v.push(self.root);
        v
    }

    /// Canonical label, e.g. `mldsa65:mldsa87`.
    pub fn label(&self) -> String {
        self.algs().iter().map(|a| a.name).collect::<Vec<_>>().join(":")
    }
}

impl fmt::Display for ChainSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

impl Serialize for ChainSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.label())
    }
}

/// How the client's key shares relate to its supported groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ShareStrategy {
    /// One key share, for the first group: no HelloRetryRequest.
    #[default]
    One,
    /// The shares listed explicitly (e.g. hybrid + x25519, OpenSSL's default).
    Listed,
}

/// What the client's ClientHello looks like beyond its groups and key shares (the
/// `client_profile` factor).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ClientProfile {
    /// The stack's own ClientHello: its extensions in its order, no GREASE.
    #[default]
    Plain,
    /// Chrome's (BoringSSL only, Chrome's own stack): GREASE values (RFC 8701) among the
    /// cipher suites, groups, key shares, versions, signature schemes and extensions, and the
    /// extension order permuted per connection. With `--key-shares X25519MLKEM768,x25519` it
    /// is the ClientHello Chrome sends today but for the extensions only a browser sets
    /// (ALPS, ECH GREASE, …).
    Chrome,
}

impl ClientProfile {
    pub const ALL: [ClientProfile; 2] = [ClientProfile::Plain, ClientProfile::Chrome];
    /// The stacks that can send each profile other than `plain`.
    pub const CHROME_STACKS: &'static [Stack] = &[Stack::Boringssl];

    pub fn name(self) -> &'static str {
        match self {
            ClientProfile::Plain => "plain",
            ClientProfile::Chrome => "chrome",
        }
    }

    pub fn parse(s: &str) -> Result<ClientProfile> {
        let t = s.trim().to_ascii_lowercase();
        ClientProfile::ALL
            .into_iter()
            .find(|p| p.name() == t)
            .ok_or_else(|| Error::unknown("client profile", s, ClientProfile::ALL.map(|p| p.name())))
    }
}

/// RFC 7685 padding of the client's ClientHello (the `client_hello_padding` factor): what
/// study 001's client did (cURL sets `SSL_OP_ALL`, which holds OpenSSL's
/// `SSL_OP_TLSEXT_PADDING`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HelloPadding {
    /// The stack's ClientHello as it builds it: no padding to a size (BoringSSL's one-byte
    /// padding extension after an empty last extension, for WebSphere, is its own and stays).
    #[default]
    None,
    /// OpenSSL's "F5 workaround" (RFC 7685): a ClientHello whose handshake message, 4-byte
    /// header included, would be 256–511 bytes gets a padding extension that makes it 512
    /// (513–516 when it was 508–511: the extension takes 4 bytes and at least one of content);
    /// one of 255 bytes or less, or 512 or more, is sent as it is.
    To512,
}

impl HelloPadding {
    pub const ALL: [HelloPadding; 2] = [HelloPadding::None, HelloPadding::To512];
    /// The size a TLS library pads a ClientHello to (RFC 7685's F5 workaround).
    pub const TARGET_BYTES: u64 = 512;
    /// Hellos this size or larger (header included) are padded; smaller ones are not.
    pub const FROM_BYTES: u64 = 256;
    /// The stacks that can pad: OpenSSL's `SSL_OP_TLSEXT_PADDING`. rustls and s2n-tls have no
    /// padding, and the BoringSSL of the `boring` crate 5.x no longer pads to 512 (only its
    /// one-byte WebSphere extension).
    pub const STACKS: &'static [Stack] = &[Stack::Openssl];

    pub fn name(self) -> &'static str {
        match self {
            HelloPadding::None => "none",
            HelloPadding::To512 => "512",
        }
    }

    /// `none` (also `off`, `false`) or `512` (also `512B`, `rfc7685`). Another size is
    /// refused: no library pads to it, and pqtls cannot add the padding itself.
    pub fn parse(s: &str) -> Result<HelloPadding> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "" | "none" | "off" | "false" | "no" => return Ok(HelloPadding::None),
            "rfc7685" => return Ok(HelloPadding::To512),
            _ => {}
        }
        match crate::units::bytes(&t) {
            Ok(n) if n == Self::TARGET_BYTES => Ok(HelloPadding::To512),
            Ok(n) => Err(Error::Invalid(format!(
                "{n} bytes: a ClientHello can be padded only to 512 bytes, the size TLS libraries pad \
                 to (RFC 7685's F5 workaround: OpenSSL's SSL_OP_TLSEXT_PADDING, which cURL sets); pqtls cannot pad to \
                 another size itself — OpenSSL writes custom extensions before its own, so the padding's length is \
                 known only after building the hello twice, which would change the client's measured CPU. Give 512 or \
                 none"
            ))),
            Err(_) => Err(Error::unknown("ClientHello padding", s, HelloPadding::ALL.map(|p| p.name()))),
        }
    }

    /// Negotiated = requested, from the sizes of the ClientHellos the client wrote (header
    /// included, each hello of a HelloRetryRequest on its own): with `512`, none may be
    /// 256–511 bytes (padded, it would be 512 or more). `context`: the configuration, for the
    /// error.
    pub fn check(self, hellos: impl IntoIterator<Item = u64>, context: impl Fn() -> String) -> Result<()> {
        if self != HelloPadding::To512 {
            return Ok(());
        }
        match hellos.into_iter().find(|b| (Self::FROM_BYTES..Self::TARGET_BYTES).contains(b)) {
            Some(b) => Err(Error::Mismatch {
                what: "ClientHello size",
                wanted: "512 bytes or more (RFC 7685 pads a hello of 256–511 bytes to 512)".into(),
                got: format!("{b} bytes, unpadded"),
                context: context(),
            }),
            None => Ok(()),
        }
    }
}

impl fmt::Display for HelloPadding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for ClientProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything that defines one handshake to measure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandshakeConfig {
    pub stack: Stack,
    /// Supported groups, in the client's order of preference. The server supports exactly
    /// the first one unless key shares say otherwise, so what is negotiated is what was asked.
    pub groups: Vec<&'static Group>,
    /// Key shares the client sends. Empty: one share, for the first group.
    pub key_shares: Vec<&'static Group>,
    /// rustls: let an X25519MLKEM768 share and an x25519 share use one X25519 key.
    pub share_x25519: bool,
    /// The ClientHello's profile: the stack's own, or Chrome's (BoringSSL).
    pub client_profile: ClientProfile,
    pub chain: ChainSpec,
    /// Client certificate chain: mutual TLS when present.
    pub client_chain: Option<ChainSpec>,
    pub cipher: &'static Cipher,
    /// The server sends the root certificate too.
    pub send_root: bool,
    /// The client verifies the signature on the root (a parent that must be verified stands
    /// for an intermediate CA).
    pub verify_parent: bool,
    /// Session tickets issued; resumed handshakes measured instead of full ones.
    pub resumption: bool,
    /// Code points moved for this run (OQS peers built with other ones); empty: the
    /// catalogue's. The rustls backend applies them.
    pub codepoints: CodepointOverrides,
    /// RFC 8879: the server (and, with mutual TLS, the client) sends its certificate chain
    /// compressed with this algorithm, and the peer offers only it; `None`: not offered.
    pub cert_compression: CertCompression,
    /// The server's authentication bytes: its Certificate and CertificateVerify handshake
    /// messages (4-byte headers included), made exactly this size by a padding extension in the
    /// leaf certificate (docs/auth-bytes.md). `None`: the chain as it is.
    pub auth_bytes: Option<u64>,
    /// RFC 7685 padding of the ClientHello to 512 bytes (OpenSSL only).
    pub client_hello_padding: HelloPadding,
}

/// The largest handshake message body TLS can carry (a 24-bit length).
pub const MAX_HANDSHAKE_BODY_BYTES: u64 = (1 << 24) - 1;

impl HandshakeConfig {
    /// The usual starting point: one group, one chain, one cipher, nothing else.
    pub fn new(stack: Stack, group: &'static Group, chain: ChainSpec, cipher: &'static Cipher) -> Self {
        HandshakeConfig {
            stack,
            groups: vec![group],
            key_shares: Vec::new(),
            share_x25519: false,
            client_profile: ClientProfile::Plain,
            chain,
            client_chain: None,
            cipher,
            send_root: false,
            verify_parent: false,
            resumption: false,
            codepoints: CodepointOverrides::none(),
            cert_compression: CertCompression::None,
            auth_bytes: None,
            client_hello_padding: HelloPadding::None,
        }
    }

    /// Bytes of the server's CertificateVerify message: header (4), scheme (2), length (2) and
    /// the leaf's signature (its maximum for a variable-size one).
    pub fn certificate_verify_bytes(&self) -> u64 {
        8 + self.chain.leaf.signature_bytes as u64
    }

    /// With `auth_bytes`: the size the server's Certificate message must have, header
    /// included (the authentication bytes less the CertificateVerify).
    pub fn certificate_message_bytes(&self) -> Option<u64> {
        self.auth_bytes.map(|a| a.saturating_sub(self.certificate_verify_bytes()))
    }

    /// With `auth_bytes`: checks the measured Certificate + CertificateVerify of the server
    /// (`messages` as [`crate::record::Bytes::messages`]) against what was asked; a difference
    /// is an error (the stack sent another chain than the padded one).
    pub fn check_auth_bytes(&self, messages: &indexmap::IndexMap<String, u64>) -> Result<()> {
        let Some(wanted) = self.auth_bytes else { return Ok(()) };
        let got =
            messages.get("Certificate").copied().unwrap_or(0) + messages.get("CertificateVerify").copied().unwrap_or(0);
        if got != wanted {
            return Err(Error::Mismatch {
                what: "authentication bytes (Certificate + CertificateVerify)",
                wanted: wanted.to_string(),
                got: got.to_string(),
                context: format!("{} on {}", self.label(), self.stack),
            });
        }
        Ok(())
    }

    /// The group the server is expected to select.
    pub fn expected_group(&self) -> &'static Group {
        self.groups[0]
    }

    /// The key shares actually sent.
    pub fn shares(&self) -> Vec<&'static Group> {
        if self.key_shares.is_empty() {
            vec![self.groups[0]]
        } else {
            self.key_shares.clone()
        }
    }

    /// True when the client offers no share for the group the server will pick.
    pub fn expects_hrr(&self) -> bool {
        !self.shares().contains(&self.expected_group())
    }

    /// A configuration from the names of its group, chain (`leaf:root`, …) and cipher suite,
    /// checked ([`HandshakeConfig::validate`]); the error names what would work.
    pub fn named(stack: Stack, group: &str, chain: &str, cipher: &str) -> Result<Self> {
        let cfg =
            HandshakeConfig::new(stack, catalogue::group(group)?, ChainSpec::parse(chain)?, catalogue::cipher(cipher)?);
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks that the stack provides everything and that the combination makes sense;
    /// the error names what would work.
    pub fn validate(&self) -> Result<()> {
        if self.groups.is_empty() {
            return Err(Error::Invalid("no group given; e.g. --group x25519".into()));
        }
        for g in self.groups.iter().chain(self.key_shares.iter()) {
            if !g.provided_by(self.stack) {
                return Err(Error::Unsupported(format!(
                    "group {} is not available on {}; stacks that have it: {}",
                    g.name,
                    self.stack,
                    names(g.stacks)
                )));
            }
        }
        for s in &self.key_shares {
            if !self.groups.contains(s) {
                return Err(Error::Invalid(format!(
                    "key share {} is not among the supported groups ({}); add it to the group list",
                    s.name,
                    self.groups.iter().map(|g| g.name).collect::<Vec<_>>().join(", ")
                )));
            }
        }
        if self.share_x25519 {
            if self.stack != Stack::Rustls {
                return Err(Error::Unsupported(
                    "--share-x25519 (one X25519 key behind both an X25519MLKEM768 and an x25519 share) is a rustls optimisation; use --stack rustls".into(),
                ));
            }
            let shares = self.shares();
            if !(shares.iter().any(|g| g.name == "X25519MLKEM768") && shares.iter().any(|g| g.name == "x25519")) {
                return Err(Error::Invalid(
                    "--share-x25519 needs both X25519MLKEM768 and x25519 key shares: --key-shares X25519MLKEM768,x25519".into(),
                ));
            }
        }
        if !self.cert_compression.stacks().contains(&self.stack) {
            return Err(Error::Unsupported(format!(
                "certificate compression {} is not available on {}; stacks that have it: {}",
                self.cert_compression,
                self.stack,
                names(self.cert_compression.stacks())
            )));
        }
        if self.client_profile != ClientProfile::Plain && !ClientProfile::CHROME_STACKS.contains(&self.stack) {
            return Err(Error::Unsupported(format!(
                "client profile {} (Chrome's ClientHello: GREASE values, permuted extensions) is not available on {}; \
                 stacks that have it: {} (Chrome's own TLS stack)",
                self.client_profile,
                self.stack,
                names(ClientProfile::CHROME_STACKS)
            )));
        }
        if let Some(a) = self.auth_bytes {
            self.validate_auth_bytes(a)?;
        }
        if self.client_hello_padding != HelloPadding::None && !HelloPadding::STACKS.contains(&self.stack) {
            return Err(Error::Unsupported(format!(
                "client_hello_padding = {} (RFC 7685: a ClientHello of 256–511 bytes padded to 512) is not available \
                 on {}: it has no padding option{}; stacks that pad: {}",
                self.client_hello_padding,
                self.stack,
                if self.stack == Stack::Boringssl {
                    " (BoringSSL dropped its F5 padding: it adds only a one-byte padding extension after an empty \
                     last extension)"
                } else {
                    ""
                },
                names(HelloPadding::STACKS)
            )));
        }
        if !self.cipher.stacks.contains(&self.stack) {
            return Err(Error::Unsupported(format!(
                "cipher suite {} is not available on {}; stacks that have it: {}",
                self.cipher.name,
                self.stack,
                names(self.cipher.stacks)
            )));
        }
        for (who, chain) in
            std::iter::once(("server", &self.chain)).chain(self.client_chain.iter().map(|c| ("client", c)))
        {
            let leaf = chain.leaf;
            if !leaf.provided_by(self.stack) {
                let others = crate::catalogue::SIG_ALGS
                    .iter()
                    .filter(|s| s.provided_by(self.stack))
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ");
                let elsewhere = if leaf.tls_stacks.is_empty() {
                    "no stack signs with it in TLS".to_string()
                } else {
                    format!("stacks that sign with it in TLS: {}", names(leaf.tls_stacks))
                };
                return Err(Error::Unsupported(format!(
                    "{who} leaf {} cannot sign TLS handshakes on {} ({elsewhere}); {} leaves available on {}: {others}",
                    leaf.name, self.stack, who, self.stack
                )));
            }
            if self.stack == Stack::Rustls {
                for parent in chain.algs().into_iter().skip(1) {
                    if !parent.provided_by(Stack::Rustls) {
                        return Err(Error::Unsupported(format!(
                            "rustls cannot verify certificates signed with {} ({who} chain {}); stacks that can: {}",
                            parent.name,
                            chain,
                            names(&[Stack::Openssl])
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    fn validate_auth_bytes(&self, a: u64) -> Result<()> {
        let leaf = self.chain.leaf;
        if leaf.variable_signature {
            return Err(Error::Unsupported(format!(
                "auth_bytes = {a} needs a leaf whose signature has one size, so that Certificate + \
                 CertificateVerify can be exactly {a} bytes: {} signatures vary from handshake to handshake; \
                 fixed-size leaves: {}",
                leaf.name,
                crate::catalogue::SIG_ALGS
                    .iter()
                    .filter(|s| !s.variable_signature && s.provided_by(self.stack))
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if self.resumption {
            return Err(Error::Invalid(format!(
                "auth_bytes = {a} with resumption: a resumed handshake sends no certificate, so there is nothing to pad; \
                 measure full handshakes (resumption = false)"
            )));
        }
        let limit = MAX_HANDSHAKE_BODY_BYTES;
        if a > limit {
            return Err(Error::Invalid(format!(
                "auth_bytes = {a} is above TLS's limit: a handshake message carries at most 2^24 − 1 = {limit} bytes; \
                 use at most {limit}"
            )));
        }
        Ok(())
    }

    /// Checks a completed handshake against what was asked: group, cipher, signature scheme
    /// (full handshakes), HelloRetryRequest and resumption. Any difference is an error.
    pub fn check(&self, got: &crate::backend::Negotiated, resumed_expected: bool) -> Result<()> {
        let ctx = || self.label();
        let mismatch = |what: &'static str, wanted: &str, got: &str| Error::Mismatch {
            what,
            wanted: wanted.to_string(),
            got: got.to_string(),
            context: format!("{} on {}", ctx(), self.stack),
        };
        if got.group != self.expected_group().name {
            return Err(mismatch("group", self.expected_group().name, &got.group));
        }
        if got.cipher != self.cipher.name {
            return Err(mismatch("cipher suite", self.cipher.name, &got.cipher));
        }
        if got.resumed != resumed_expected {
            return Err(mismatch("resumption", &resumed_expected.to_string(), &got.resumed.to_string()));
        }
        if !got.resumed && got.sigalg != self.chain.leaf.scheme {
            return Err(mismatch("signature scheme", self.chain.leaf.scheme, &got.sigalg));
        }
        if got.hrr != self.expects_hrr() {
            return Err(mismatch("HelloRetryRequest", &self.expects_hrr().to_string(), &got.hrr.to_string()));
        }
        if !got.resumed {
            self.check_compressed("server", &self.chain, got.cert_compression.as_deref())?;
        }
        Ok(())
    }

    /// Negotiated = requested for `client_hello_padding`: each ClientHello the client wrote
    /// (`client.wrote`, header included; an untraced side has none) is outside 256–511 bytes.
    pub fn check_client_hello(&self, client: &crate::trace::SideSample) -> Result<()> {
        let hellos = client.wrote.iter().filter(|(m, _)| *m == crate::trace::HsType::ClientHello);
        self.client_hello_padding
            .check(hellos.map(|(_, b)| *b as u64), || format!("{} on {}", self.label(), self.stack))
    }

    /// [`HandshakeConfig::check_client_hello`] from a message table (as
    /// [`crate::record::Bytes::messages`]): its `ClientHello` is the sum of both hellos after
    /// a HelloRetryRequest, which cannot be checked one by one, so only a handshake without one is.
    pub fn check_client_hello_messages(&self, messages: &indexmap::IndexMap<String, u64>) -> Result<()> {
        if self.expects_hrr() {
            return Ok(());
        }
        let hello = messages.get("ClientHello").copied();
        self.client_hello_padding.check(hello, || format!("{} on {}", self.label(), self.stack))
    }

    /// Negotiated = requested for the client's chain (mutual TLS, full handshakes): how the
    /// client wrote it, from its traced messages (`client.wrote`; an untraced side has none,
    /// and its chain is checked by nothing here).
    pub fn check_client_chain(&self, client: &crate::trace::SideSample, resumed: bool) -> Result<()> {
        let Some(chain) = self.client_chain.as_ref().filter(|_| !resumed && !client.wrote.is_empty()) else {
            return Ok(());
        };
        use crate::trace::HsType;
        let seen = if client.wrote.iter().any(|(m, _)| *m == HsType::CompressedCertificate) {
            Some(client.compressed.first().and_then(|h| CertCompression::from_code_point(h.algorithm)).map_or_else(
                || format!("0x{:04x}", client.compressed.first().map_or(0, |h| h.algorithm)),
                |c| c.name().to_string(),
            ))
        } else if client.wrote.iter().any(|(m, _)| *m == HsType::Certificate) {
            Some("none".to_string())
        } else {
            None
        };
        self.check_compressed("client", chain, seen.as_deref())
    }

    /// Negotiated = requested for certificate compression: the `who` side's chain must have
    /// arrived as a CompressedCertificate of the requested algorithm (`seen`: what its peer
    /// received — `none` for a plain Certificate, `None` when the peer could not tell), and
    /// as a plain Certificate when none was requested.
    pub fn check_compressed(&self, who: &str, chain: &ChainSpec, seen: Option<&str>) -> Result<()> {
        let want = self.cert_compression;
        let did = match seen {
            Some(s) if s == want.name() => return Ok(()),
            Some("none") => "sent it uncompressed (a Certificate message, msg_type 11)".to_string(),
            Some(other) => format!("sent it compressed with {other} (a CompressedCertificate message)"),
            None if want == CertCompression::None => return Ok(()),
            None => "sent it in a way its peer could not tell (no certificate message observed)".to_string(),
        };
        let asked = match want {
            CertCompression::None => "uncompressed".to_string(),
            w => format!("compressed with {w} (CompressedCertificate, RFC 8879)"),
        };
        Err(Error::Mismatch {
            what: "certificate compression",
            wanted: want.name().to_string(),
            got: seen.unwrap_or("unknown").to_string(),
            context: format!(
                "{} was asked to send the {who} chain {chain} {asked} and {did}; configuration: {}",
                self.stack,
                self.label()
            ),
        })
    }

    /// A stable identifier: equal configurations have equal ids, across runs.
    pub fn id(&self) -> String {
        let mut id = format!(
            "{}|{}|{}|{}|root={}|parent={}",
            self.stack,
            self.groups.iter().map(|g| g.name).collect::<Vec<_>>().join(","),
            self.chain.label(),
            self.cipher.name,
            self.send_root as u8,
            self.verify_parent as u8,
        );
        if !self.key_shares.is_empty() {
            id += &format!("|shares={}", self.key_shares.iter().map(|g| g.name).collect::<Vec<_>>().join(","));
        }
        if self.share_x25519 {
            id += "|share_x25519";
        }
        if self.client_profile != ClientProfile::Plain {
            id += &format!("|profile={}", self.client_profile);
        }
        if let Some(c) = &self.client_chain {
            id += &format!("|mtls={}", c.label());
        }
        if self.resumption {
            id += "|resumed";
        }
        if !self.codepoints.is_empty() {
            id += &format!("|codepoints={}", self.codepoints);
        }
        if self.cert_compression != CertCompression::None {
            id += &format!("|compress={}", self.cert_compression);
        }
        if let Some(a) = self.auth_bytes {
            id += &format!("|auth={a}");
        }
        if self.client_hello_padding != HelloPadding::None {
            id += &format!("|ch_pad={}", self.client_hello_padding);
        }
        id
    }

    /// A short human label for tables: `X25519MLKEM768 mldsa65:mldsa65` plus what differs
    /// from the defaults.
    pub fn label(&self) -> String {
        let mut s = format!("{} {}", self.groups.iter().map(|g| g.name).collect::<Vec<_>>().join(","), self.chain);
        if !self.key_shares.is_empty() {
            s += &format!(" shares={}", self.key_shares.iter().map(|g| g.name).collect::<Vec<_>>().join("+"));
        }
        if self.share_x25519 {
            s += " shared-x25519";
        }
        if self.client_profile != ClientProfile::Plain {
            s += &format!(" profile={}", self.client_profile);
        }
        if self.send_root {
            s += " +root";
        }
        if self.verify_parent {
            s += " +verify-parent";
        }
        if let Some(c) = &self.client_chain {
            s += &format!(" mtls={c}");
        }
        if self.resumption {
            s += " resumed";
        }
        if self.cert_compression != CertCompression::None {
            s += &format!(" compress={}", self.cert_compression);
        }
        if let Some(a) = self.auth_bytes {
            s += &format!(" auth={a}B");
        }
        if self.client_hello_padding != HelloPadding::None {
            s += &format!(" hello-pad={}B", self.client_hello_padding);
        }
        s
    }
}

fn names(stacks: &[Stack]) -> String {
    if stacks.is_empty() {
        return "none".into();
    }
    stacks.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
}

/// The configuration as plain names, as schema-1 records stored it (read by
/// [`crate::record::ConfigRecord`]; new records carry the scenario's factor values instead).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ConfigDesc {
    pub id: String,
    pub stack: String,
    pub group: String,
    pub groups: Vec<String>,
    pub key_shares: Vec<String>,
    pub share_x25519: bool,
    pub chain: String,
    pub client_chain: Option<String>,
    pub cipher: String,
    pub send_root: bool,
    pub verify_parent: bool,
    pub resumption: bool,
}

impl From<&HandshakeConfig> for ConfigDesc {
    fn from(c: &HandshakeConfig) -> Self {
        ConfigDesc {
            id: c.id(),
            stack: c.stack.name().into(),
            group: c.expected_group().name.into(),
            groups: c.groups.iter().map(|g| g.name.to_string()).collect(),
            key_shares: c.shares().iter().map(|g| g.name.to_string()).collect(),
            share_x25519: c.share_x25519,
            chain: c.chain.label(),
            client_chain: c.client_chain.map(|c| c.label()),
            cipher: c.cipher.name.into(),
            send_root: c.send_root,
            verify_parent: c.verify_parent,
            resumption: c.resumption,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(stack: Stack, group: &str, chain: &str, cipher: &str) -> Result<HandshakeConfig> {
        let c =
            HandshakeConfig::new(stack, catalogue::group(group)?, ChainSpec::parse(chain)?, catalogue::cipher(cipher)?);
        c.validate()?;
        Ok(c)
    }

    #[test]
    fn chains_parse_with_aliases() {
        let c = ChainSpec::parse("P-256:ML-DSA-65:mldsa87").unwrap();
        assert_eq!(c.label(), "p256:mldsa65:mldsa87");
        assert_eq!(ChainSpec::parse("ed25519").unwrap().label(), "ed25519:ed25519");
        let e = ChainSpec::parse("a:b:c:d").unwrap_err().to_string();
        assert!(e.contains("leaf:root"), "{e}");
        let e = ChainSpec::parse("p256:nope").unwrap_err().to_string();
        assert!(e.contains("unknown signature algorithm 'nope'") && e.contains("mldsa65"), "{e}");
    }

    #[test]
    fn slh_dsa_leaf_is_rejected_on_openssl_with_the_stacks_that_have_it() {
        let e = cfg(Stack::Openssl, "x25519", "slhdsa-sha2-128f:slhdsa-sha2-128f", "TLS_AES_128_GCM_SHA256")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot sign TLS handshakes on openssl"), "{e}");
        assert!(e.contains("stacks that sign with it in TLS: rustls"), "{e}");
        // ...but an SLH-DSA root is fine on OpenSSL: it verifies certificates signed with it.
        cfg(Stack::Openssl, "x25519", "p256:slhdsa-sha2-128f", "TLS_AES_128_GCM_SHA256").unwrap();
    }

    #[test]
    fn auth_bytes_that_cannot_be_made_are_refused_naming_what_would_work() {
        use crate::scenario::Scenario;
        let sc = Scenario::new([("group", "x25519"), ("chain", "mldsa65:mldsa65"), ("auth_bytes", "16KiB")]).unwrap();
        assert_eq!(sc.handshake.auth_bytes, Some(16_384));
        assert!(sc.id().ends_with("|auth=16384"), "{}", sc.id());
        assert!(sc.label().contains("auth=16384B"), "{}", sc.label());
        sc.handshake.validate().unwrap();
        assert_eq!(sc.handshake.certificate_message_bytes(), Some(16_384 - 8 - 3309));
        let refused = |chain: &str, auth: &str, resumed: &str| {
            let sc =
                Scenario::new([("group", "x25519"), ("chain", chain), ("auth_bytes", auth), ("resumption", resumed)])
                    .unwrap();
            sc.handshake.validate().unwrap_err().to_string()
        };
        let e = refused("mldsa65:mldsa65", "16777216", "false");
        assert!(e.contains("2^24 − 1 = 16777215"), "{e}");
        let e = refused("p256:p256", "16KiB", "false");
        assert!(e.contains("p256 signatures vary") && e.contains("mldsa65"), "{e}");
        let e = refused("mldsa65:mldsa65", "16KiB", "true");
        assert!(e.contains("resumed handshake sends no certificate"), "{e}");
        assert!(Scenario::new([("group", "x25519"), ("chain", "p256:p256"), ("auth_bytes", "lots")]).is_err());
    }

    #[test]
    fn key_shares_must_be_supported_groups() {
        let mut c = cfg(Stack::Openssl, "X25519MLKEM768", "p256:p256", "TLS_AES_128_GCM_SHA256").unwrap();
        c.key_shares = vec![catalogue::group("x25519").unwrap()];
        assert!(c.validate().unwrap_err().to_string().contains("not among the supported groups"));
        c.groups.push(catalogue::group("x25519").unwrap());
        c.validate().unwrap();
        assert!(c.expects_hrr());
        c.share_x25519 = true;
        assert!(c.validate().unwrap_err().to_string().contains("rustls"));
    }

    /// A compression algorithm a stack lacks is refused naming the stacks that have it; the
    /// check refuses a chain sent other than asked, naming the stack, the chain and what it did.
    #[test]
    fn certificate_compression_is_refused_where_missing_and_checked_on_the_wire() {
        let mut c = cfg(Stack::S2n, "x25519", "p256:p256", "TLS_AES_128_GCM_SHA256").unwrap();
        c.cert_compression = CertCompression::Zstd;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("certificate compression zstd is not available on s2n"), "{e}");
        assert!(e.contains("stacks that have it: openssl, rustls"), "{e}");
        c.stack = Stack::Boringssl;
        assert!(c.validate().unwrap_err().to_string().contains("not available on boringssl"));

        let mut c = cfg(Stack::Openssl, "x25519", "mldsa65:mldsa65", "TLS_AES_128_GCM_SHA256").unwrap();
        c.cert_compression = CertCompression::Brotli;
        assert!(c.id().ends_with("|compress=brotli") && c.label().ends_with(" compress=brotli"));
        let mut got = crate::backend::Negotiated {
            group: "x25519".into(),
            sigalg: c.chain.leaf.scheme.into(),
            cipher: "TLS_AES_128_GCM_SHA256".into(),
            cert_compression: Some("brotli".into()),
            ..Default::default()
        };
        c.check(&got, false).unwrap();
        got.cert_compression = Some("none".into());
        let e = c.check(&got, false).unwrap_err().to_string();
        assert!(e.contains("certificate compression 'none' but 'brotli' was requested"), "{e}");
        assert!(e.contains("openssl was asked to send the server chain mldsa65:mldsa65 compressed with brotli"), "{e}");
        assert!(e.contains("sent it uncompressed (a Certificate message"), "{e}");
        got.cert_compression = None;
        assert!(c.check(&got, false).unwrap_err().to_string().contains("could not tell"));
        // Resumed: no certificate, nothing to check.
        c.resumption = true;
        got.resumed = true;
        c.check(&got, true).unwrap();
        // Not asked: a compressed chain is as much an error as an uncompressed one asked.
        c.cert_compression = CertCompression::None;
        let e = c.check_compressed("client", &c.chain, Some("zlib")).unwrap_err().to_string();
        assert!(e.contains("client chain") && e.contains("uncompressed and sent it compressed with zlib"), "{e}");
    }

    /// `client_hello_padding`: 512 (or its spellings) and none; another size is refused naming
    /// 512 and why; the stacks without padding refuse it naming openssl; the id and label show
    /// it only when chosen; the check refuses only an unpadded hello of 256–511 bytes.
    #[test]
    fn client_hello_padding_is_512_on_openssl_only() {
        use crate::scenario::Scenario;
        for (given, want) in [("512", "512"), ("512B", "512"), ("RFC7685", "512"), ("none", "none"), ("off", "none")] {
            assert_eq!(crate::factor::canonical("client_hello_padding", given).unwrap(), want, "{given}");
        }
        let e = crate::factor::canonical("hello_padding", "1KiB").unwrap_err().to_string();
        assert!(e.contains("client_hello_padding: 1024 bytes: a ClientHello can be padded only to 512 bytes"), "{e}");
        assert!(e.contains("building the hello twice") && e.contains("Give 512 or none"), "{e}");
        let e = crate::factor::canonical("client_hello_padding", "big").unwrap_err().to_string();
        assert!(e.contains("'big'") && e.contains("none") && e.contains("512"), "{e}");

        let sc = Scenario::new([("group", "x25519"), ("chain", "p256:p256"), ("client_hello_padding", "512")]).unwrap();
        assert_eq!(sc.handshake.client_hello_padding, HelloPadding::To512);
        assert!(sc.id().ends_with("|ch_pad=512") && sc.id() == sc.handshake.id(), "{}", sc.id());
        assert!(sc.label().contains("hello-pad=512B") && sc.handshake.label().contains("hello-pad=512B"));
        sc.handshake.validate().unwrap();
        assert!(!Scenario::new([("group", "x25519"), ("chain", "p256:p256")]).unwrap().id().contains("ch_pad"));
        for stack in ["rustls", "s2n", "boringssl"] {
            let e = sc.with([("stack", stack)]).unwrap().handshake.validate().unwrap_err().to_string();
            assert!(e.contains(&format!("not available on {stack}")) && e.contains("stacks that pad: openssl"), "{e}");
        }

        let padded = sc.handshake;
        let ctx = || "here".to_string();
        for ok in [[226], [512], [515], [986]] {
            padded.client_hello_padding.check(ok, ctx).unwrap();
        }
        let e = padded.client_hello_padding.check([226, 300], ctx).unwrap_err().to_string();
        assert!(e.contains("ClientHello size '300 bytes, unpadded'") && e.contains("(here)"), "{e}");
        HelloPadding::None.check([300], ctx).unwrap();
    }

    #[test]
    fn ids_are_stable_and_distinct() {
        let a = cfg(Stack::Openssl, "x25519", "p256:p256", "TLS_AES_128_GCM_SHA256").unwrap();
        let mut b = a.clone();
        b.send_root = true;
        assert_ne!(a.id(), b.id());
        assert_eq!(a.id(), "openssl|x25519|p256:p256|TLS_AES_128_GCM_SHA256|root=0|parent=0");
    }
}
