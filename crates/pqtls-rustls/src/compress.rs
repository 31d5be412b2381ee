//! Certificate compression (RFC 8879) on rustls: its own zlib and brotli codecs (its `zlib`
//! and `brotli` features: zlib-rs, the brotli crates) and zstd through the `zstd` crate
//! (libzstd), each wrapped so that compressing and decompressing are timed operations of
//! the endpoint inside the call (`cert_compress`, `cert_decompress`: [`crate::steps`]) and
//! the endpoint learns how its peer's chain arrived (negotiated = requested).
//!
//! rustls compresses a server's chain once per configuration and keeps it
//! (`CompressionCache`, at `CompressionLevel::Amortized`: the codecs' strongest setting), as
//! OpenSSL does with `SSL_CTX_compress_certs`: `cert_compress` appears in the handshake that
//! fills the cache (a warm-up one), `cert_decompress` in every handshake.

use crate::hooks::{op, with_current};
use pqtls_core::catalogue::CertCompression;
use rustls::compress::{
    CertCompressor, CertDecompressor, CompressionFailed, CompressionLevel, DecompressionFailed, BROTLI_COMPRESSOR,
    BROTLI_DECOMPRESSOR, ZLIB_COMPRESSOR, ZLIB_DECOMPRESSOR,
};
use rustls::CertificateCompressionAlgorithm;

/// zstd's strongest regular level, for a chain compressed once and kept (rustls' other
/// codecs use their maximum there too); its default level for a one-off compression.
const ZSTD_AMORTIZED_LEVEL: i32 = 19;
const ZSTD_INTERACTIVE_LEVEL: i32 = zstd::DEFAULT_COMPRESSION_LEVEL;

/// zstd through libzstd (the `zstd` crate), with rustls' compressor traits.
#[derive(Debug)]
struct Zstd;

impl CertCompressor for Zstd {
    fn compress(&self, input: Vec<u8>, level: CompressionLevel) -> Result<Vec<u8>, CompressionFailed> {
        let level = match level {
            CompressionLevel::Interactive => ZSTD_INTERACTIVE_LEVEL,
            CompressionLevel::Amortized => ZSTD_AMORTIZED_LEVEL,
        };
        zstd::bulk::compress(&input, level).map_err(|_| CompressionFailed)
    }

    fn algorithm(&self) -> CertificateCompressionAlgorithm {
        CertificateCompressionAlgorithm::Zstd
    }
}

impl CertDecompressor for Zstd {
    fn decompress(&self, input: &[u8], output: &mut [u8]) -> Result<(), DecompressionFailed> {
        // Exactly the announced length, or the message is malformed (RFC 8879 §4).
        match zstd::bulk::decompress_to_buffer(input, output) {
            Ok(n) if n == output.len() => Ok(()),
            _ => Err(DecompressionFailed),
        }
    }

    fn algorithm(&self) -> CertificateCompressionAlgorithm {
        CertificateCompressionAlgorithm::Zstd
    }
}

/// A codec timed as `cert_compress` / `cert_decompress` in the current endpoint's trace.
#[derive(Debug)]
struct Timed<C: 'static + ?Sized>(&'static C);

impl CertCompressor for Timed<dyn CertCompressor> {
    fn compress(&self, input: Vec<u8>, level: CompressionLevel) -> Result<Vec<u8>, CompressionFailed> {
        op("cert_compress", || self.0.compress(input, level))
    }

    fn algorithm(&self) -> CertificateCompressionAlgorithm {
        self.0.algorithm()
    }
}

impl CertDecompressor for Timed<dyn CertDecompressor> {
    fn decompress(&self, input: &[u8], output: &mut [u8]) -> Result<(), DecompressionFailed> {
        let r = op("cert_decompress", || self.0.decompress(input, output));
        let code = u16::from(self.0.algorithm());
        with_current(|h| h.peer_cert_compression = Some(code));
        r
    }

    fn algorithm(&self) -> CertificateCompressionAlgorithm {
        self.0.algorithm()
    }
}

static ZSTD: Zstd = Zstd;
static ZLIB_C: Timed<dyn CertCompressor> = Timed(ZLIB_COMPRESSOR);
static BROTLI_C: Timed<dyn CertCompressor> = Timed(BROTLI_COMPRESSOR);
static ZSTD_C: Timed<dyn CertCompressor> = Timed(&ZSTD);
static ZLIB_D: Timed<dyn CertDecompressor> = Timed(ZLIB_DECOMPRESSOR);
static BROTLI_D: Timed<dyn CertDecompressor> = Timed(BROTLI_DECOMPRESSOR);
static ZSTD_D: Timed<dyn CertDecompressor> = Timed(&ZSTD);

/// The compressors a configuration offers: only the requested algorithm (none: none, so
/// rustls sends plain Certificates even with its features on).
pub(crate) fn compressors(c: CertCompression) -> Vec<&'static dyn CertCompressor> {
    match c {
        CertCompression::None => Vec::new(),
        CertCompression::Zlib => vec![&ZLIB_C],
        CertCompression::Brotli => vec![&BROTLI_C],
        CertCompression::Zstd => vec![&ZSTD_C],
    }
}

/// The decompressors a configuration offers (the compress_certificate extension it sends).
pub(crate) fn decompressors(c: CertCompression) -> Vec<&'static dyn CertDecompressor> {
    match c {
        CertCompression::None => Vec::new(),
        CertCompression::Zlib => vec![&ZLIB_D],
        CertCompression::Brotli => vec![&BROTLI_D],
        CertCompression::Zstd => vec![&ZSTD_D],
    }
}
