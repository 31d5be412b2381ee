//! Makes (or finds in the cache) chains and prints their files:
//! `cargo run -p pqtls-pki --example make-chain -- [--client] [--seed N] SPEC...`
//! (directory: `$PQTLS_PKI_DIR` or `./pki`; the example reads the variable, the library does not).

use pqtls_core::config::ChainSpec;
use pqtls_pki::{Pki, Role};

fn main() -> pqtls_core::Result<()> {
    let mut role = Role::Server;
    let mut seed = 0;
    let mut specs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--client" => role = Role::Client,
            "--seed" => {
                let v = args.next().unwrap_or_default();
                seed =
                    v.parse().map_err(|_| pqtls_core::Error::Invalid(format!("--seed takes a number, not '{v}'")))?;
            }
            _ => specs.push(ChainSpec::parse(&a)?),
        }
    }
    let dir = std::env::var_os("PQTLS_PKI_DIR").filter(|d| !d.is_empty()).map(std::path::PathBuf::from);
    let pki = Pki::open(dir.unwrap_or_else(Pki::default_dir))?.with_seed(seed);
    for spec in specs {
        let t = std::time::Instant::now();
        let files = pki.chain(&spec, role)?;
        println!(
            "{spec} ({:?}): key {} chain {} root {}",
            t.elapsed(),
            files.leaf_key.display(),
            files.chain.display(),
            files.root.display()
        );
    }
    Ok(())
}
