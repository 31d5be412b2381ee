//! `pqtls layers`: the layer split of every transaction in a packet capture (pcap or pcapng),
//! from the packets alone and the TLS key log (docs/layers.md): per layer the count and
//! p50/p95/p99, the anomalies counted, what could not be found.

use anyhow::Result;
use pqtls_capture::{Analysis, Connection};
use pqtls_core::timeline::LAYER_NAMES;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct LayersArgs {
    /// The capture (pcap or pcapng; e.g. from `pqtls load --capture` or tcpdump -w).
    pub pcap: PathBuf,
    /// The TLS key log of the same run (SSLKEYLOGFILE format): without it only the TCP
    /// handshake and the ClientHello are found.
    #[arg(long)]
    pub keylog: Option<PathBuf>,
    /// Write everything, per connection, as JSON to FILE (`-`: standard output, without the
    /// table).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// One CSV row per transaction to FILE (`-`: standard output, without the table): its
    /// connection, moments (ns since the first packet), layers (ns) and sizes.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
}

pub fn run(args: LayersArgs) -> Result<()> {
    let flags = [("--json", args.json.as_deref()), ("--csv", args.csv.as_deref())];
    let inputs: Vec<&std::path::Path> = std::iter::once(args.pcap.as_path()).chain(args.keylog.as_deref()).collect();
    crate::output::not_an_input(&flags, &inputs)?;
    let terminal = crate::output::terminal(&flags, false)?;
    let json = crate::output::create(args.json.as_deref())?;
    let csv = crate::output::create(args.csv.as_deref())?;
    let analysed = pqtls_capture::analyse(&args.pcap, args.keylog.as_deref());
    let a = match analysed.and_then(|a| usable(&a, &args).map(|()| a).map_err(pqtls_core::Error::Invalid)) {
        Ok(a) => a,
        Err(e) => {
            crate::output::discard([&json, &csv]);
            return Err(e.into());
        }
    };
    let summary = a.layers();
    if let Some(out) = csv {
        crate::output::write(out, csv_rows(&a).as_bytes())?;
    }
    if let Some(out) = json {
        let doc = serde_json::json!({
            "pcap": args.pcap,
            "keylog": args.keylog,
            "layers": summary.layers,
            "refused": summary.refused,
            "analysis": a,
        });
        let mut text = serde_json::to_vec_pretty(&doc)?;
        text.push(b'\n');
        crate::output::write(out, &text)?;
    }
    terminal.print(&text(&a, &args, &summary))
}

/// A capture with nothing to split is an error that says why.
fn usable(a: &Analysis, args: &LayersArgs) -> std::result::Result<(), String> {
    let file = args.pcap.display();
    if a.connections.is_empty() {
        return Err(format!(
            "{file}: no TCP connection begins in this capture ({} packets, {} of connections whose SYN it does not \
             have, {} not TCP): start the capture before the run",
            a.packets, a.anomalies.packets_without_syn, a.anomalies.not_tcp_packets
        ));
    }
    let with_data = a.connections.iter().filter(|c| c.client_to_server_bytes > 0).count();
    if !a.connections.iter().any(|c| c.tls) && a.transactions().count() == 0 {
        return Err(format!(
            "{file}: no TLS connection and no HTTP transaction in this capture ({} TCP connections, {with_data} with \
             data, none starting with a ClientHello or an HTTP request)",
            a.connections.len()
        ));
    }
    Ok(())
}

fn endpoints(c: &Connection) -> String {
    format!("{} → {}", c.client.map_or("?".into(), |a| a.to_string()), c.server.map_or("?".into(), |a| a.to_string()))
}

fn text(a: &Analysis, args: &LayersArgs, summary: &pqtls_capture::LayerSummary) -> String {
    let mut s = String::new();
    let tls = a.connections.iter().filter(|c| c.tls).count();
    let transactions = a.transactions().count();
    let opened = a.transactions().filter(|(_, t)| t.timeline.connect_start_ns.is_some()).count();
    let _ = writeln!(
        s,
        "{}: {} ({}), {} packets · {} connections ({} TLS, {} plain) · {} transactions ({} on new connections, {} kept alive)",
        args.pcap.display(),
        a.format,
        a.links.join(", "),
        a.packets,
        a.connections.len(),
        tls,
        a.connections.len() - tls,
        transactions,
        opened,
        transactions - opened
    );
    if let Some(k) = &args.keylog {
        let _ = writeln!(s, "key log {}: secrets for {} connections", k.display(), a.key_log_connections);
    }
    let layers = pqtls_export::tables::layers::capture_layers(&summary.layers);
    let _ = writeln!(s, "{}", crate::table::draw(&layers, 1));
    let _ = writeln!(
        s,
        "connection layers over the {opened} transactions that opened their connection (tcp and tcp_to_tls also \
         over TLS connections whose transactions are unknown); http_first_byte and http over all {transactions} \
         (docs/layers.md)"
    );
    let x = &a.anomalies;
    let _ = writeln!(
        s,
        "anomalies: {} SYN retransmissions (lost SYNs) · {} SYN/ACK retransmissions · {} retransmitted segments · \
         {} out of order · {} resets · {} connections with unfilled gaps · {} packets of connections begun before \
         the capture · {} unparsed packets",
        x.syn_retransmissions,
        x.syn_ack_retransmissions,
        x.retransmissions,
        x.out_of_order,
        x.resets,
        x.connections_with_gaps,
        x.packets_without_syn,
        x.unparsed_packets
    );
    if args.keylog.is_none() && tls > 0 {
        let _ = writeln!(
            s,
            "no --keylog: the TLS handshake's end and the HTTP moments are in encrypted records; only the tcp and \
             tcp_to_tls layers are known (SYN, SYN/ACK, ClientHello are in the clear)"
        );
    } else if x.connections_without_keys > 0 {
        let first = a.connections.iter().find(|c| c.tls && c.keys != pqtls_capture::tls::Keys::Found);
        let _ = writeln!(
            s,
            "{} of {tls} TLS connections have no secrets in the key log: their handshake end and HTTP moments are \
             unknown and they are left out{}",
            x.connections_without_keys,
            first.map_or(String::new(), |c| format!(
                " (first: {}, client random {})",
                endpoints(c),
                c.client_random.as_deref().unwrap_or("?")
            ))
        );
    }
    let problems: Vec<String> = a
        .connections
        .iter()
        .filter(|c| c.keys == pqtls_capture::tls::Keys::Found || !c.tls)
        .flat_map(|c| c.problems.iter().map(move |p| format!("{}: {p}", endpoints(c))))
        .collect();
    for p in problems.iter().take(5) {
        let _ = writeln!(s, "problem: {p}");
    }
    if problems.len() > 5 {
        let _ = writeln!(s, "… and {} more problems (--json lists them all)", problems.len() - 5);
    }
    for r in &summary.refused {
        let _ = writeln!(s, "not split (moments out of order): {r}");
    }
    s
}

fn csv_rows(a: &Analysis) -> String {
    let mut s = String::from("connection,client,server,transaction,method,status,request_bytes,response_bytes");
    for m in ["connect_start_ns", "connected_ns", "client_hello_ns", "handshake_done_ns", "request_ns"] {
        let _ = write!(s, ",{m}");
    }
    s.push_str(",first_byte_ns,last_byte_ns");
    for l in LAYER_NAMES {
        let _ = write!(s, ",{l}_ns");
    }
    s.push('\n');
    let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
    for (ci, c) in a.connections.iter().enumerate() {
        for (ti, t) in c.transactions.iter().enumerate() {
            let tl = &t.timeline;
            let _ = write!(
                s,
                "{ci},{},{},{ti},{},{},{},{},{},{},{},{},{},{},{}",
                c.client.map_or(String::new(), |a| a.to_string()),
                c.server.map_or(String::new(), |a| a.to_string()),
                t.method,
                t.status,
                t.request_bytes,
                t.response_bytes,
                opt(tl.connect_start_ns),
                opt(tl.connected_ns),
                opt(tl.client_hello_ns),
                opt(tl.handshake_done_ns),
                tl.request_ns,
                tl.first_byte_ns,
                tl.last_byte_ns
            );
            match tl.layers() {
                Ok(l) => {
                    for (_, ns) in l.named() {
                        let _ = write!(s, ",{ns}");
                    }
                }
                Err(_) => s.push_str(&",".repeat(LAYER_NAMES.len())),
            }
            s.push('\n');
        }
    }
    s
}
