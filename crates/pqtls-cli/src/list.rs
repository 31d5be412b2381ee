//! `pqtls list`: the catalogue, per stack.

use crate::table;
use anyhow::Result;
use pqtls_core::catalogue::{self, GroupKind, Stack};

#[derive(clap::Args)]
pub struct ListArgs {
    /// Write the catalogue as JSON to FILE (`-`: standard output, without the tables).
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
}

fn stacks(s: &[Stack]) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
    }
}

pub fn run(args: ListArgs) -> Result<()> {
    let terminal = crate::output::terminal(&[("--json", args.json.as_deref())], false)?;
    let json = crate::output::create(args.json.as_deref())?;
    let built: Vec<Stack> = crate::context::all_backends().iter().map(|b| b.stack()).collect();
    if let Some(out) = json {
        let v = serde_json::json!({
            "stacks_built": built,
            "groups": catalogue::GROUPS.iter().map(|g| serde_json::json!({
                "name": g.name, "aliases": g.aliases, "code_point": format!("0x{:04X}", g.code_point),
                "code_point_source": catalogue::code_point_source(g.code_point, g.iana), "iana": g.iana, "post_quantum": g.post_quantum, "kind": g.kind,
                "client_share_bytes": g.client_share_bytes(), "server_share_bytes": g.server_share_bytes(),
                "stacks": g.stacks,
            })).collect::<Vec<_>>(),
            "signature_algorithms": catalogue::SIG_ALGS,
            "cipher_suites": catalogue::CIPHERS,
        });
        crate::output::write(out, format!("{}\n", serde_json::to_string_pretty(&v)?).as_bytes())?;
    }
    let mut text = format!("Stacks in this build: {}\n\n", stacks(&built));
    let mut t = table::new(&["group", "code point", "kind", "client share", "server share", "stacks", "aliases"]);
    for g in catalogue::GROUPS {
        let kind = match g.kind {
            GroupKind::Classical { .. } => "classical".to_string(),
            GroupKind::Kem { .. } => "KEM".to_string(),
            GroupKind::Hybrid { first, second } => format!("hybrid {first}+{second}"),
        };
        let cp = match catalogue::code_point_source(g.code_point, g.iana) {
            "IANA" => format!("0x{:04X}", g.code_point),
            source => format!("0x{:04X} ({source})", g.code_point),
        };
        t.add_row(vec![
            g.name.to_string(),
            cp,
            kind,
            format!("{} B", g.client_share_bytes()),
            format!("{} B", g.server_share_bytes()),
            stacks(g.stacks),
            g.aliases.join(", "),
        ]);
    }
    text.push_str(&format!("Key-exchange groups\n{t}\n\n"));
    let mut t =
        table::new(&["algorithm", "TLS scheme", "code point", "public key", "signature", "signs in TLS on", "note"]);
    for s in catalogue::SIG_ALGS {
        let sig = if s.variable_signature {
            format!("≤ {} B", s.signature_bytes)
        } else {
            format!("{} B", s.signature_bytes)
        };
        t.add_row(vec![
            s.name.to_string(),
            s.scheme.to_string(),
            match catalogue::code_point_source(s.code_point, s.iana) {
                "IANA" => format!("0x{:04X}", s.code_point),
                source => format!("0x{:04X} ({source})", s.code_point),
            },
            format!("{} B", s.public_key_bytes),
            sig,
            stacks(s.tls_stacks),
            s.note.to_string(),
        ]);
    }
    text.push_str(&format!("Signature algorithms (certificates for all of them come from `pqtls pki`)\n{t}\n"));
    text.push_str(
        "(OQS) code points are oqs-provider 0.9-0.11's; movable per run for peers built with others \
         (docs/oqs.md).\nslhdsa-* is FIPS 205 SLH-DSA, not the OQS SPHINCS+ (sphincssha2128ssimple, \
         0xFEB6) of the reference studies: a different algorithm on the wire.\n\n",
    );
    let mut t = table::new(&["cipher suite", "code point", "stacks", "aliases"]);
    for c in catalogue::CIPHERS {
        t.add_row(vec![c.name.to_string(), format!("0x{:04X}", c.code_point), stacks(c.stacks), c.aliases.join(", ")]);
    }
    text.push_str(&format!("TLS 1.3 cipher suites\n{t}\n"));
    terminal.print(&text)
}
