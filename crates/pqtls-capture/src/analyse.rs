//! A capture's TCP connections, followed from their SYN, reassembled, their TLS records
//! opened with a key log, and the moments of each HTTP transaction as a
//! [`pqtls_core::timeline::Timeline`] (docs/layers.md says which packet stands for which
//! moment).

use crate::http;
use crate::keylog::{short_hex, KeyLog};
use crate::pcap::{self, Parsed};
use crate::tcp::Reassembler;
use crate::tls::{self, Keys, Plain};
use indexmap::IndexMap;
use pqtls_core::load::{histogram, Latency};
use pqtls_core::timeline::{Timeline, LAYER_NAMES};
use pqtls_core::{Error, Result};
use serde::Serialize;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;

/// One HTTP request and its response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Transaction {
    /// The moments, ns since the capture's first packet. The first transaction of a
    /// connection has its connection's moments; later ones (kept alive) have none.
    pub timeline: Timeline,
    /// The request's bytes (head and body), as the client wrote them (decrypted).
    pub request_bytes: u64,
    /// The response's bytes (head and body).
    pub response_bytes: u64,
    /// The request's method and the response's status.
    pub method: String,
    pub status: String,
}

/// One TCP connection of the capture.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Connection {
    pub client: Option<SocketAddr>,
    pub server: Option<SocketAddr>,
    /// Capture ns (since the first packet) of the first SYN and of the first SYN/ACK.
    pub syn_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syn_ack_ns: Option<u64>,
    /// Capture ns of the first ClientHello's first byte (TLS connections).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_hello_ns: Option<u64>,
    /// SYNs sent again (a SYN lost, or its SYN/ACK) and SYN/ACKs sent again.
    pub syn_retransmissions: u32,
    pub syn_ack_retransmissions: u32,
    /// Data segments carrying bytes already seen, per direction.
    pub retransmissions_client: u32,
    pub retransmissions_server: u32,
    /// Data segments that arrived ahead of a gap, per direction.
    pub out_of_order: u32,
    /// Bytes after a gap the capture never filled (lost by the capture, or cut).
    pub bytes_after_gap: u64,
    pub reset: bool,
    pub client_to_server_bytes: u64,
    pub server_to_client_bytes: u64,
    /// TLS (true) or plain HTTP.
    pub tls: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_random: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cipher_suite: Option<String>,
    pub hello_retry: bool,
    pub keys: Keys,
    /// Handshake message → bytes on the wire (4-byte header included), named as in-situ
    /// records name them.
    pub handshake_messages: IndexMap<String, u64>,
    pub transactions: Vec<Transaction>,
    /// What could not be found or read on this connection.
    pub problems: Vec<String>,
}

/// Counts over the whole capture: nothing unusual is hidden.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Anomalies {
    /// SYNs sent again (Σ over connections): each one a lost SYN or SYN/ACK.
    pub syn_retransmissions: u64,
    pub syn_ack_retransmissions: u64,
    /// Data segments with bytes already seen (Σ over connections and directions).
    pub retransmissions: u64,
    pub out_of_order: u64,
    /// Connections ended by a RST.
    pub resets: u64,
    /// TCP packets of connections whose SYN is not in the capture (begun before it started).
    pub packets_without_syn: u64,
    /// Packets that could not be parsed (cut by the snap length, malformed).
    pub unparsed_packets: u64,
    /// Packets that are not TCP.
    pub not_tcp_packets: u64,
    /// Connections with bytes after a gap never filled.
    pub connections_with_gaps: u64,
    /// TLS connections whose secrets are not in the key log.
    pub connections_without_keys: u64,
    /// Requests without a complete response (the capture ended, or the connection was cut).
    pub unanswered_requests: u64,
}

/// What a capture holds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Analysis {
    /// `pcap` or `pcapng`, and the link types.
    pub format: String,
    pub links: Vec<String>,
    pub packets: u64,
    /// Capture time of the first packet, ns since the Unix epoch (the timelines' origin).
    pub origin_unix_ns: u64,
    /// Whether a key log was given, and how many connections it had secrets for.
    pub key_log: bool,
    pub key_log_connections: usize,
    pub connections: Vec<Connection>,
    pub anomalies: Anomalies,
}

/// Per-connection state while packets are read.
struct Follow {
    conn: Connection,
    client_isn: u32,
    c2s: Reassembler,
    s2c: Option<Reassembler>,
}

/// Reads the capture at `pcap` and, with `keylog`, opens the TLS records of its connections.
/// Errors: the file is not a capture, is truncated, the key log cannot be read, or the key
/// log matches none of the capture's TLS connections or its secrets do not open their
/// records (it belongs to another run). Connections without secrets while others have them
/// are counted and named in [`Connection::problems`], not an error.
pub fn analyse(pcap: &Path, keylog: Option<&Path>) -> Result<Analysis> {
    let keys = keylog.map(KeyLog::read).transpose()?;
    let mut analysis = analyse_with(pcap, keys.as_ref())?;
    if let (Some(path), Some(keys)) = (keylog, &keys) {
        check_key_log(&analysis, path, keys)?;
        analysis.key_log_connections = keys.len();
    }
    Ok(analysis)
}

/// A key log that matches nothing, or whose secrets do not open what they should, is an error.
fn check_key_log(a: &Analysis, path: &Path, keys: &KeyLog) -> Result<()> {
    let tls: Vec<&Connection> = a.connections.iter().filter(|c| c.tls && c.client_random.is_some()).collect();
    if tls.is_empty() {
        return Ok(());
    }
    let with_keys = tls.iter().filter(|c| c.keys == Keys::Found).count();
    if with_keys == 0 {
        return Err(Error::Invalid(format!(
            "the key log {} matches none of the capture's {} TLS connections (it has secrets for {} other \
             connections; the first ClientHello's random is {}): it is the key log of another run",
            path.display(),
            tls.len(),
            keys.len(),
            tls[0].client_random.as_deref().unwrap_or("?")
        )));
    }
    if let Some(c) =
        tls.iter().find(|c| c.keys == Keys::Found && c.problems.iter().any(|p| p.contains("does not open")))
    {
        let p = c.problems.iter().find(|p| p.contains("does not open")).map_or("", |p| p.as_str());
        return Err(Error::Invalid(format!(
            "the key log {} has secrets for connection {} → {} that do not open its records: {p}",
            path.display(),
            c.client.map_or("?".into(), |a| a.to_string()),
            c.server.map_or("?".into(), |a| a.to_string()),
        )));
    }
    Ok(())
}

/// [`analyse`] with a key log already read (or none).
pub fn analyse_with(pcap: &Path, keys: Option<&KeyLog>) -> Result<Analysis> {
    let mut follows: Vec<Follow> = Vec::new();
    // 4-tuple (client, server) → the connection using it now.
    let mut current: HashMap<(SocketAddr, SocketAddr), usize> = HashMap::new();
    let mut anomalies = Anomalies::default();
    let mut origin: Option<u64> = None;
    let summary = pcap::read_packets(pcap, |ts_unix, link, data| {
        let origin = *origin.get_or_insert(ts_unix);
        let ts = ts_unix.saturating_sub(origin);
        let seg = match pcap::parse(link, data) {
            Parsed::Tcp(s) => s,
            Parsed::Other => {
                anomalies.not_tcp_packets += 1;
                return;
            }
            Parsed::Unparsed(_) => {
                anomalies.unparsed_packets += 1;
                return;
            }
        };
        if seg.syn && !seg.ack {
            let key = (seg.src, seg.dst);
            if let Some(&i) = current.get(&key) {
                let f = &mut follows[i];
                if f.client_isn == seg.seq && f.s2c.is_none() {
                    f.conn.syn_retransmissions += 1;
                    return;
                }
                if f.client_isn == seg.seq {
                    // A SYN again after the SYN/ACK: the SYN/ACK was lost on its way.
                    f.conn.syn_retransmissions += 1;
                    return;
                }
            }
            current.insert(key, follows.len());
            follows.push(Follow {
                conn: Connection { client: Some(seg.src), server: Some(seg.dst), syn_ns: ts, ..Connection::default() },
                client_isn: seg.seq,
                c2s: Reassembler::new(seg.seq),
                s2c: None,
            });
            if !seg.payload.is_empty() {
                follows.last_mut().map(|f| f.c2s.segment(seg.seq.wrapping_add(1), seg.payload, ts));
            }
            return;
        }
        let (key, from_client) = if let Some(&i) = current.get(&(seg.src, seg.dst)) {
            ((seg.src, seg.dst), follows[i].conn.client == Some(seg.src))
        } else if current.contains_key(&(seg.dst, seg.src)) {
            ((seg.dst, seg.src), false)
        } else {
            anomalies.packets_without_syn += 1;
            return;
        };
        let f = &mut follows[current[&key]];
        if seg.rst {
            f.conn.reset = true;
        }
        if seg.syn && seg.ack && !from_client {
            match &f.s2c {
                None => {
                    f.s2c = Some(Reassembler::new(seg.seq));
                    f.conn.syn_ack_ns = Some(ts);
                }
                Some(_) => f.conn.syn_ack_retransmissions += 1,
            }
            return;
        }
        if from_client {
            f.c2s.segment(seg.seq, seg.payload, ts);
        } else if let Some(r) = f.s2c.as_mut() {
            r.segment(seg.seq, seg.payload, ts);
        } else if !seg.payload.is_empty() {
            anomalies.packets_without_syn += 1;
        }
    })?;
    let mut connections = Vec::with_capacity(follows.len());
    for f in follows {
        let c = finish(f, keys);
        anomalies.syn_retransmissions += c.syn_retransmissions as u64;
        anomalies.syn_ack_retransmissions += c.syn_ack_retransmissions as u64;
        anomalies.retransmissions += (c.retransmissions_client + c.retransmissions_server) as u64;
        anomalies.out_of_order += c.out_of_order as u64;
        anomalies.resets += c.reset as u64;
        anomalies.connections_with_gaps += (c.bytes_after_gap > 0) as u64;
        anomalies.connections_without_keys += (c.tls && keys.is_some() && c.keys != Keys::Found) as u64;
        connections.push(c);
    }
    Ok(Analysis {
        format: summary.format.to_string(),
        links: summary.links,
        packets: summary.packets,
        origin_unix_ns: origin.unwrap_or(0),
        key_log: keys.is_some(),
        key_log_connections: keys.map_or(0, |k| k.len()),
        connections,
        anomalies,
    })
}

/// A followed connection's streams read: TLS, HTTP, the transactions.
fn finish(f: Follow, keys: Option<&KeyLog>) -> Connection {
    let mut c = f.conn;
    let empty = Reassembler::default();
    let s2c = f.s2c.as_ref().unwrap_or(&empty);
    c.retransmissions_client = f.c2s.retransmissions;
    c.retransmissions_server = s2c.retransmissions;
    c.out_of_order = f.c2s.out_of_order + s2c.out_of_order;
    c.bytes_after_gap = f.c2s.bytes_after_gap() + s2c.bytes_after_gap();
    c.client_to_server_bytes = f.c2s.stream.len();
    c.server_to_client_bytes = s2c.stream.len();
    if c.syn_ack_ns.is_none() {
        c.problems.push(format!(
            "no SYN/ACK: the connection was not accepted ({} SYN{} sent)",
            1 + c.syn_retransmissions,
            if c.syn_retransmissions == 0 { "" } else { "s" }
        ));
    }
    if c.bytes_after_gap > 0 {
        c.problems.push(format!(
            "{} bytes after a gap that the capture never filled: what follows the gap is not read",
            c.bytes_after_gap
        ));
    }
    let (client_app, server_app, hello_ns, finished_ns);
    if f.c2s.stream.is_empty() {
        return c;
    } else if tls::looks_like_tls(&f.c2s.stream.data) {
        c.tls = true;
        let t = tls::decode(&f.c2s.stream, &s2c.stream, keys);
        c.client_random = t.client_random.map(|r| r.iter().map(|b| format!("{b:02x}")).collect());
        c.cipher_suite = t.cipher_suite;
        c.hello_retry = t.hello_retry;
        c.keys = t.keys;
        c.client_hello_ns = t.client_hello_ns;
        c.handshake_messages = t.messages;
        c.problems.extend(t.problems);
        if keys.is_none() {
            c.problems.push(format!(
                "no key log: only the ClientHello ({}) is known; the client's Finished and the HTTP moments are \
                 in encrypted records",
                t.client_random.map_or("?".into(), |r| short_hex(&r))
            ));
        }
        (client_app, server_app, hello_ns, finished_ns) =
            (t.client_app, t.server_app, t.client_hello_ns, t.client_finished_ns);
    } else {
        (client_app, server_app, hello_ns, finished_ns) =
            (Plain::of_stream(&f.c2s.stream), Plain::of_stream(&s2c.stream), None, None);
    }
    transactions(&mut c, &client_app, &server_app, hello_ns, finished_ns);
    c
}

/// Pairs the requests with the responses (HTTP/1.1 answers in order) into timelines.
fn transactions(c: &mut Connection, client: &Plain, server: &Plain, hello_ns: Option<u64>, finished_ns: Option<u64>) {
    if client.data.is_empty() {
        return;
    }
    let (reqs, stop) = http::requests(&client.data);
    if let Some(stop) = stop {
        c.problems.push(format!("client's HTTP: {stop}"));
    }
    let methods: Vec<String> = reqs.iter().map(|m| m.what.clone()).collect();
    let (resps, stop) = http::responses(&server.data, &methods);
    if let Some(stop) = stop {
        c.problems.push(format!("server's HTTP: {stop}"));
    }
    if resps.len() < reqs.len() {
        c.problems.push(format!("{} of {} requests without a complete response", reqs.len() - resps.len(), reqs.len()));
    }
    for (i, (rq, rs)) in reqs.iter().zip(&resps).enumerate() {
        let first = i == 0;
        let timeline = Timeline {
            client_port: c.client.map(|a| a.port()),
            scheduled_ns: None,
            connect_start_ns: first.then_some(c.syn_ns),
            connected_ns: if first { c.syn_ack_ns } else { None },
            client_hello_ns: if first { hello_ns } else { None },
            handshake_done_ns: if first { finished_ns } else { None },
            request_ns: client.first_ns(rq.start),
            first_byte_ns: server.first_ns(rs.start),
            last_byte_ns: server.last_ns(rs.end - 1),
        };
        c.transactions.push(Transaction {
            timeline,
            request_bytes: rq.end - rq.start,
            response_bytes: rs.end - rs.start,
            method: rq.what.clone(),
            status: rs.what.clone(),
        });
    }
}

/// The distribution of each layer over the transactions where it applies: the connection
/// layers (`tcp`, `tcp_to_tls`, `tls`, `tls_to_http`) over transactions that opened their
/// connection (TLS ones for the TLS layers), the HTTP layers over every transaction. A TLS
/// connection without transactions (no key for it, or no key log) still gives its `tcp` and
/// `tcp_to_tls` layers (SYN, SYN/ACK and ClientHello are in the clear).
#[derive(Clone, Debug, Default, Serialize)]
pub struct LayerSummary {
    pub layers: IndexMap<String, Latency>,
    /// Transactions whose moments are out of order (`Timeline::layers` refused them): named.
    pub refused: Vec<String>,
}

impl Analysis {
    /// Every transaction, in connection order.
    pub fn transactions(&self) -> impl Iterator<Item = (&Connection, &Transaction)> {
        self.connections.iter().flat_map(|c| c.transactions.iter().map(move |t| (c, t)))
    }

    /// The layer distributions ([`LayerSummary`]).
    pub fn layers(&self) -> LayerSummary {
        let mut hist: Vec<_> = LAYER_NAMES.iter().map(|_| histogram()).collect();
        let mut refused = Vec::new();
        for c in self.connections.iter().filter(|c| c.tls && c.transactions.is_empty()) {
            if let (Some(ack), Some(hello)) = (c.syn_ack_ns, c.client_hello_ns) {
                if c.syn_ns <= ack && ack <= hello {
                    let _ = hist[0].record(ack - c.syn_ns);
                    let _ = hist[1].record(hello - ack);
                }
            }
        }
        for (c, t) in self.transactions() {
            let l = match t.timeline.layers() {
                Ok(l) => l,
                Err(e) => {
                    refused.push(format!(
                        "{} → {}: {e}",
                        c.client.map_or("?".into(), |a| a.to_string()),
                        c.server.map_or("?".into(), |a| a.to_string())
                    ));
                    continue;
                }
            };
            let opened = t.timeline.connect_start_ns.is_some();
            let tls = t.timeline.client_hello_ns.is_some();
            for (i, (name, ns)) in l.named().into_iter().enumerate() {
                let applies = match name {
                    "tcp" => opened,
                    "tcp_to_tls" | "tls" => opened && tls,
                    "tls_to_http" => opened,
                    _ => true,
                };
                if applies {
                    // Values beyond the histogram's range cannot happen with auto-resize.
                    let _ = hist[i].record(ns);
                }
            }
        }
        LayerSummary {
            layers: LAYER_NAMES.iter().zip(&hist).map(|(n, h)| (n.to_string(), Latency::of(h))).collect(),
            refused,
        }
    }
}
