//! An X.509 v3 certificate builder that signs with any [`CertKey`]: the TBSCertificate is
//! encoded here (x509-cert / der), only the signature comes from the key.

use crate::key::CertKey;
use pqtls_core::{Error, Result};
use std::str::FromStr;
use std::time::Duration;
use x509_cert::der::asn1::{BitString, Ia5String, OctetString, UtcTime};
use x509_cert::der::oid::db::rfc5280::{ID_KP_CLIENT_AUTH, ID_KP_SERVER_AUTH};
use x509_cert::der::oid::{AssociatedOid, ObjectIdentifier};
use x509_cert::der::{Decode, Encode};
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, KeyUsages, SubjectAltName,
    SubjectKeyIdentifier,
};
use x509_cert::ext::Extension;
use x509_cert::name::Name;
use x509_cert::serial_number::SerialNumber;
use x509_cert::spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};
use x509_cert::time::{Time, Validity};
use x509_cert::{Certificate, TbsCertificate, Version};

/// 2025-01-01T00:00:00Z and 2045-01-01T00:00:00Z: a fixed window, so that certificates do
/// not depend on when they were made.
const NOT_BEFORE: u64 = 1_735_689_600;
const NOT_AFTER: u64 = 2_366_841_600;

/// What a certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Self-signed trust anchor.
    Root,
    /// CA below the root, path length 0.
    Intermediate,
    /// TLS server: SAN DNS:localhost, IP:127.0.0.1; EKU serverAuth.
    ServerLeaf,
    /// TLS client: EKU clientAuth.
    ClientLeaf,
}

/// One certificate to make.
pub struct CertRequest<'a> {
    pub profile: Profile,
    /// Subject distinguished name, RFC 4514 string (`CN=...,O=...`).
    pub subject: &'a str,
    /// Positive serial number bytes, big-endian (at most 20).
    pub serial: &'a [u8],
    /// The certified key (its public half goes into the certificate).
    pub key: &'a dyn CertKey,
    /// Non-critical padding extensions, one per slice (the first under [`PADDING_OID`], the
    /// next under its sibling arcs `…37.2`, …), each an OCTET STRING of those bytes: what makes
    /// a certificate any size (`auth_bytes`). Empty: none.
    pub padding: &'a [&'a [u8]],
}

/// The padding extension's OID, under 1.3.6.1.3 (the Internet's arc for experiments, RFC 1155,
/// never a real extension's). Non-critical, so every verifier ignores it. A second padding
/// extension (when one alone cannot give a size: DER length boundaries) is `…37.2`.
pub const PADDING_OID: &str = "1.3.6.1.3.37.1";
const PADDING_ARC: &str = "1.3.6.1.3.37";

/// The issuer of a certificate: its subject name and its key.
pub struct Issuer<'a> {
    pub subject: &'a str,
    pub key: &'a dyn CertKey,
}

fn der_err(what: &str) -> impl FnOnce(x509_cert::der::Error) -> Error + '_ {
    move |e| Error::Other(format!("X.509 encoding: {what}: {e}"))
}

fn key_id(spki: &SubjectPublicKeyInfoOwned) -> Vec<u8> {
    // RFC 5280 4.2.1.2 method 1: SHA-1 of the subjectPublicKey BIT STRING contents.
    openssl::sha::sha1(spki.subject_public_key.raw_bytes()).to_vec()
}

fn extension<T: Encode + AssociatedOid>(value: &T, critical: bool) -> Result<Extension> {
    let der = value.to_der().map_err(der_err("extension"))?;
    Ok(Extension { extn_id: T::OID, critical, extn_value: OctetString::new(der).map_err(der_err("extension value"))? })
}

/// Builds and signs a certificate; `issuer` is `None` for a self-signed one. Returns DER.
pub fn build(req: &CertRequest<'_>, issuer: Option<&Issuer<'_>>) -> Result<Vec<u8>> {
    let (issuer_name, issuer_key) = match issuer {
        Some(i) => (i.subject, i.key),
        None => (req.subject, req.key),
    };
    let spki = SubjectPublicKeyInfoOwned::from_der(&req.key.spki_der()?).map_err(der_err("subject public key"))?;
    let issuer_spki =
        SubjectPublicKeyInfoOwned::from_der(&issuer_key.spki_der()?).map_err(der_err("issuer public key"))?;
    let sig_alg = AlgorithmIdentifierOwned::from_der(&issuer_key.signature_algorithm_der()?)
        .map_err(der_err("signature algorithm"))?;
    let name = |s: &str| Name::from_str(s).map_err(|e| Error::Invalid(format!("distinguished name '{s}': {e}")));
    let time =
        |secs| UtcTime::from_unix_duration(Duration::from_secs(secs)).map(Time::UtcTime).map_err(der_err("validity"));

    let mut extensions = Vec::new();
    match req.profile {
        Profile::Root | Profile::Intermediate => {
            let path_len = if req.profile == Profile::Intermediate { Some(0) } else { None };
            extensions.push(extension(&BasicConstraints { ca: true, path_len_constraint: path_len }, true)?);
            extensions.push(extension(&KeyUsage(KeyUsages::KeyCertSign | KeyUsages::CRLSign), true)?);
        }
        Profile::ServerLeaf | Profile::ClientLeaf => {
            extensions.push(extension(&BasicConstraints { ca: false, path_len_constraint: None }, true)?);
            extensions.push(extension(&KeyUsage(KeyUsages::DigitalSignature.into()), true)?);
            if req.profile == Profile::ServerLeaf {
                let dns = Ia5String::new("localhost").map_err(der_err("SAN"))?;
                let ip = OctetString::new([127u8, 0, 0, 1]).map_err(der_err("SAN"))?;
                extensions.push(extension(
                    &SubjectAltName(vec![GeneralName::DnsName(dns), GeneralName::IpAddress(ip)]),
                    false,
                )?);
                extensions.push(extension(&ExtendedKeyUsage(vec![ID_KP_SERVER_AUTH]), false)?);
            } else {
                extensions.push(extension(&ExtendedKeyUsage(vec![ID_KP_CLIENT_AUTH]), false)?);
            }
        }
    }
    for (i, padding) in req.padding.iter().enumerate() {
        let dotted = format!("{PADDING_ARC}.{}", i + 1);
        let oid = ObjectIdentifier::new(&dotted).map_err(|e| Error::Other(format!("padding OID: {e}")))?;
        let value = OctetString::new(*padding).map_err(der_err("padding"))?.to_der().map_err(der_err("padding"))?;
        extensions.push(Extension {
            extn_id: oid,
            critical: false,
            extn_value: OctetString::new(value).map_err(der_err("padding extension"))?,
        });
    }
    let ski = OctetString::new(key_id(&spki)).map_err(der_err("SKI"))?;
    extensions.push(extension(&SubjectKeyIdentifier(ski), false)?);
    let aki = OctetString::new(key_id(&issuer_spki)).map_err(der_err("AKI"))?;
    extensions.push(extension(
        &AuthorityKeyIdentifier {
            key_identifier: Some(aki),
            authority_cert_issuer: None,
            authority_cert_serial_number: None,
        },
        false,
    )?);

    if req.serial.is_empty() || req.serial.len() > 20 || req.serial[0] & 0x80 != 0 || req.serial[0] == 0 {
        return Err(Error::Invalid(format!(
            "certificate serial must be 1..=20 bytes, positive and minimal; got {} bytes",
            req.serial.len()
        )));
    }
    let tbs = TbsCertificate {
        version: Version::V3,
        serial_number: SerialNumber::new(req.serial).map_err(der_err("serial"))?,
        signature: sig_alg.clone(),
        issuer: name(issuer_name)?,
        validity: Validity { not_before: time(NOT_BEFORE)?, not_after: time(NOT_AFTER)? },
        subject: name(req.subject)?,
        subject_public_key_info: spki,
        issuer_unique_id: None,
        subject_unique_id: None,
        extensions: Some(extensions),
    };
    let tbs_der = tbs.to_der().map_err(der_err("TBSCertificate"))?;
    let signature = issuer_key.sign(&tbs_der)?;
    let cert = Certificate {
        tbs_certificate: tbs,
        signature_algorithm: sig_alg,
        signature: BitString::from_bytes(&signature).map_err(der_err("signature"))?,
    };
    cert.to_der().map_err(der_err("Certificate"))
}

/// DER `AlgorithmIdentifier` for `oid` (dotted, e.g. `1.3.9999.3.11`) with absent parameters:
/// what [`CertKey::signature_algorithm_der`] returns for most post-quantum algorithms.
pub fn algorithm_identifier_der(oid: &str) -> Result<Vec<u8>> {
    let oid = ObjectIdentifier::new(oid).map_err(|e| Error::Invalid(format!("OID '{oid}': {e}")))?;
    AlgorithmIdentifierOwned { oid, parameters: None }.to_der().map_err(der_err("AlgorithmIdentifier"))
}

/// DER `SubjectPublicKeyInfo` of a raw public key under `oid` with absent parameters: what
/// [`CertKey::spki_der`] returns for most post-quantum algorithms.
pub fn spki_der(oid: &str, public_key: &[u8]) -> Result<Vec<u8>> {
    let algorithm = AlgorithmIdentifierOwned::from_der(&algorithm_identifier_der(oid)?).map_err(der_err("OID"))?;
    let subject_public_key = BitString::from_bytes(public_key).map_err(der_err("public key"))?;
    SubjectPublicKeyInfoOwned { algorithm, subject_public_key }.to_der().map_err(der_err("SubjectPublicKeyInfo"))
}

/// PKCS#8 v1 `PrivateKeyInfo` PEM: `private_key` (the algorithm's own private key encoding)
/// in the OCTET STRING, under `oid` with absent parameters: what
/// [`CertKey::private_key_pem`] returns for a key from another library.
pub fn pkcs8_pem(oid: &str, private_key: &[u8]) -> Result<String> {
    let mut body = vec![0x02, 0x01, 0x00]; // version v1 (0)
    body.extend(algorithm_identifier_der(oid)?);
    body.extend(tlv(0x04, private_key));
    let der = tlv(0x30, &body);
    Ok(pem("PRIVATE KEY", &der))
}

/// Reads one DER tag-length-value from the front of `input`: (tag, contents, rest). `None`
/// for a truncated or indefinite-length encoding. The one DER walker of pqtls' key code.
pub fn read_tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |acc, b| (acc << 8) | *b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The algorithm OID (DER contents, e.g. `2b ce 0f 03 0b` for 1.3.9999.3.11) and the
/// privateKey OCTET STRING contents of a PKCS#8 v1 PrivateKeyInfo (or v2 OneAsymmetricKey).
pub fn parse_pkcs8(der: &[u8]) -> Option<(&[u8], &[u8])> {
    let (0x30, body, _) = read_tlv(der)? else { return None };
    let (0x02, _version, rest) = read_tlv(body)? else { return None };
    let (0x30, alg, rest) = read_tlv(rest)? else { return None };
    let (0x06, oid, _) = read_tlv(alg)? else { return None };
    let (0x04, key, _) = read_tlv(rest)? else { return None };
    Some((oid, key))
}

/// One DER tag-length-value.
pub fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = contents.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(contents);
    out
}

/// PEM with 64-character base64 lines.
pub fn pem(label: &str, der: &[u8]) -> String {
    let b64 = openssl::base64::encode_block(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_lengths() {
        assert_eq!(tlv(0x04, &[7; 3]), [0x04, 3, 7, 7, 7]);
        assert_eq!(&tlv(0x04, &[0; 0x7f])[..2], [0x04, 0x7f]);
        assert_eq!(&tlv(0x04, &[0; 0x80])[..3], [0x04, 0x81, 0x80]);
        assert_eq!(&tlv(0x30, &[0; 1281])[..4], [0x30, 0x82, 0x05, 0x01]);
    }

    #[test]
    fn der_walker_reads_what_tlv_writes() {
        let nested = tlv(0x30, &[tlv(0x04, &[9; 300]), tlv(0x02, &[1])].concat());
        let (tag, body, rest) = read_tlv(&nested).expect("outer");
        assert_eq!((tag, rest.len()), (0x30, 0));
        let (tag, key, rest) = read_tlv(body).expect("inner");
        assert_eq!((tag, key.len()), (0x04, 300));
        assert_eq!(read_tlv(rest), Some((0x02, &[1u8][..], &[][..])));
        assert_eq!(read_tlv(&nested[..nested.len() - 1]), None);
        assert_eq!(read_tlv(&[0x04, 0x80]), None);
        let pem = pkcs8_pem("1.3.9999.3.11", &[5; 40]).expect("pkcs8");
        let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = openssl::base64::decode_block(&b64).expect("base64");
        assert_eq!(parse_pkcs8(&der), Some((&[0x2b, 0xce, 0x0f, 0x03, 0x0b][..], &[5u8; 40][..])));
    }

    #[test]
    fn helpers_for_other_libraries() {
        // A Falcon-512-sized key under the OQS OID: the DER parses back.
        let spki = spki_der("1.3.9999.3.11", &[1; 897]).expect("spki");
        let parsed = SubjectPublicKeyInfoOwned::from_der(&spki).expect("parse");
        assert_eq!(parsed.algorithm.oid.to_string(), "1.3.9999.3.11");
        assert_eq!(parsed.subject_public_key.raw_bytes().len(), 897);
        let pem = pkcs8_pem("1.3.9999.3.11", &[2; 1281]).expect("pkcs8");
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n") && pem.ends_with("-----END PRIVATE KEY-----\n"));
        assert!(pem.lines().all(|l| l.len() <= 64));
        assert!(matches!(algorithm_identifier_der("not an oid"), Err(Error::Invalid(_))));
    }
}
