//! Which OpenSSL build is linked: its version, configure line and compiler flags.
//!
//! Two builds of one OpenSSL version can differ several-fold in cost (P-384/P-521 without
//! `enable-ec_nistp_64_gcc_128` are ~7× slower), so the identity of a build is part of every
//! result: [`BuildInfo::identity`] is what `--version` prints and what records carry in
//! `env.libraries["openssl"]` (which `compare` checks). It leaves out the build date, so two
//! builds with the same sources and configuration are the same build.

include!(concat!(env!("OUT_DIR"), "/build_info.rs"));

/// Features OpenSSL 3.5 leaves out of a default Linux build (`%disabled` of its Configure, with
/// the cascades a default build shows in configuration.h, which never names `fips`), as
/// `OPENSSL_NO_*` names, lower case.
const DEFAULT_DISABLED: &[&str] = &[
    "acvp_tests",
    "asan",
    "brotli",
    "brotli_dynamic",
    "comp_alg",
    "crypto_mdebug",
    "crypto_mdebug_backtrace",
    "demos",
    "devcryptoeng",
    "ec_nistp_64_gcc_128",
    "egd",
    "external_tests",
    "fips_jitter",
    "fips_post",
    "fips_securitychecks",
    "fuzz_afl",
    "fuzz_libfuzzer",
    "h3demo",
    "hqinterop",
    "jitter",
    "ktls",
    "md2",
    "msan",
    "pie",
    "rc5",
    "sctp",
    "ssl3",
    "ssl3_method",
    "sslkeylog",
    "tfo",
    "trace",
    "ubsan",
    "unit_test",
    "uplink",
    "weak_ssl_ciphers",
    "winstore",
    "zlib",
    "zlib_dynamic",
    "zstd",
    "zstd_dynamic",
];

/// What the linked OpenSSL says about itself, plus what its headers said at build time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInfo {
    /// `OpenSSL 3.5.5 27 Jan 2026`.
    pub version: String,
    /// `OPENSSL_VERSION_NUMBER` of the library running.
    pub version_number: u64,
    /// The configure line, when pqtls' scripts/openssl.sh made the build; `None` for another
    /// installation (OpenSSL does not record it; [`Self::disabled`] and [`Self::cflags`] do).
    pub configure: Option<String>,
    /// `compiler: gcc -fPIC -pthread -m64 ... -O3 ...` (`OpenSSL_version(OPENSSL_CFLAGS)`).
    pub cflags: String,
    /// `platform: linux-x86_64`.
    pub platform: String,
    /// `built on: ...` (not part of the identity).
    pub built_on: String,
    /// Features the build disabled (`OPENSSL_NO_*` of its configuration.h, lower case).
    pub disabled: Vec<String>,
    /// The installation directory linked (OPENSSL_DIR at build time).
    pub root: String,
}

impl BuildInfo {
    /// True for the production build scripts/openssl.sh makes.
    pub fn is_pqtls_build(&self) -> bool {
        self.configure.is_some()
    }

    /// Whether the 64-bit NIST curve implementations (P-224/256/384/521) are compiled in.
    pub fn has_ec_nistp_64_gcc_128(&self) -> bool {
        !self.disabled.iter().any(|d| d == "ec_nistp_64_gcc_128")
    }

    /// The build's options as configure arguments, relative to OpenSSL 3.5's defaults:
    /// `enable-x` for a feature OpenSSL leaves out by default but the build has, `no-x` for one
    /// the build left out. OpenSSL does not record its configure line; this is what its
    /// configuration.h says instead.
    pub fn options_vs_defaults(&self) -> Vec<String> {
        let off = |f: &str| self.disabled.iter().any(|d| d == f);
        // What configure derives from another option is not one of its own: `enable-zlib-dynamic`
        // implies zlib, and any compression library certificate compression (`comp_alg`).
        let implied = |f: &str| match f {
            "zlib" | "brotli" | "zstd" => !off(&format!("{f}_dynamic")),
            "comp_alg" => ["zlib", "brotli", "zstd"].iter().any(|c| !off(c)),
            _ => false,
        };
        let mut options: Vec<String> = DEFAULT_DISABLED
            .iter()
            .filter(|f| !off(f) && !implied(f))
            .map(|f| format!("enable-{}", f.replace('_', "-")))
            .collect();
        options.extend(
            self.disabled
                .iter()
                .filter(|d| !DEFAULT_DISABLED.contains(&d.as_str()))
                .map(|d| format!("no-{}", d.replace('_', "-"))),
        );
        // The flag's own name keeps its underscores.
        options.iter().map(|o| o.replace("ec-nistp-64-gcc-128", "ec_nistp_64_gcc_128")).collect()
    }

    /// One line naming the build: version, who built it and how (configure line or disabled
    /// features), compiler flags and platform.
    pub fn identity(&self) -> String {
        let how = match &self.configure {
            Some(line) => format!("pqtls build: {line}"),
            None => {
                let options = self.options_vs_defaults();
                let options = if options.is_empty() { "OpenSSL's defaults".to_string() } else { options.join(" ") };
                format!("given build {}: {options}", self.root)
            }
        };
        format!("{} ({how}; {}; {})", self.version, self.cflags, self.platform)
    }
}

/// The linked OpenSSL's build.
pub fn build_info() -> BuildInfo {
    BuildInfo {
        version: openssl::version::version().to_string(),
        version_number: openssl::version::number() as u64,
        configure: BUILD_CONFIGURE.map(str::to_string),
        cflags: openssl::version::c_flags().to_string(),
        platform: openssl::version::platform().to_string(),
        built_on: openssl::version::built_on().to_string(),
        disabled: BUILD_DISABLED.iter().map(|s| s.to_string()).collect(),
        root: BUILD_ROOT.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> BuildInfo {
        BuildInfo {
            version: "OpenSSL 3.5.5 27 Jan 2026".into(),
            version_number: 0x3050_0050,
            configure: Some("./Configure linux-x86_64 enable-ec_nistp_64_gcc_128 no-shared".into()),
            cflags: "compiler: gcc -O3".into(),
            platform: "platform: linux-x86_64".into(),
            built_on: "built on: Mon Nov 23 05:00:00 2026 UTC".into(),
            disabled: vec!["ssl3".into()],
            root: "/x/.cache/openssl/3.5-production".into(),
        }
    }

    #[test]
    fn the_identity_names_version_configure_line_and_flags_but_not_the_date() {
        let a = sample();
        assert_eq!(
            a.identity(),
            "OpenSSL 3.5.5 27 Jan 2026 (pqtls build: ./Configure linux-x86_64 enable-ec_nistp_64_gcc_128 \
             no-shared; compiler: gcc -O3; platform: linux-x86_64)"
        );
        let rebuilt = BuildInfo { built_on: "built on: Tue Nov 24 2026".into(), ..sample() };
        assert_eq!(a.identity(), rebuilt.identity(), "a rebuild of the same configuration is the same build");
        let other = BuildInfo { configure: Some("./Configure linux-x86_64 no-shared".into()), ..sample() };
        assert_ne!(a.identity(), other.identity());
    }

    #[test]
    fn a_given_build_is_named_by_its_directory_and_disabled_features() {
        let defaults: Vec<String> = DEFAULT_DISABLED.iter().map(|s| s.to_string()).collect();
        let given = BuildInfo { configure: None, disabled: defaults.clone(), ..sample() };
        assert!(!given.is_pqtls_build());
        assert!(!given.has_ec_nistp_64_gcc_128());
        assert!(given.identity().contains("(given build /x/.cache/openssl/3.5-production: OpenSSL's defaults; "));
        let mut disabled: Vec<String> =
            defaults.into_iter().filter(|d| d != "ec_nistp_64_gcc_128" && d != "ktls").collect();
        disabled.push("camellia".into());
        let tuned = BuildInfo { configure: None, disabled, ..sample() };
        assert!(tuned.has_ec_nistp_64_gcc_128());
        assert_eq!(tuned.options_vs_defaults(), ["enable-ec_nistp_64_gcc_128", "enable-ktls", "no-camellia"]);
        assert!(tuned.identity().contains(": enable-ec_nistp_64_gcc_128 enable-ktls no-camellia; compiler: gcc -O3;"));
        assert!(sample().has_ec_nistp_64_gcc_128());
    }
}
