//! An X.509 v3 certificate builder that signs with any [`CertKey`]: the TBSCertificate is
//! encoded here (x509-cert / der), only the signature comes from the key.

use crate::key::CertKey;
use pqtls_core::{Error, Result};
use std::str::FromStr;
use std::time::Duration;
use x509_cert::der::asn1::{BitString, Ia5String, OctetString, UtcTime};
use x509_cert::der::oid::db::rfc5280::{ID_KP_CLIENT_AUTH, ID_KP_SERVER_AUTH};
use x509_cert::der::oid::AssociatedOid;
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
}

/// The issuer of a certificate: its name, key and key identifier.
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
