//! Captures built packet by packet (etherparse's builder, pcap-file's writers): what the
//! analysis must count and reassemble — a retransmitted SYN, a retransmitted and a reordered
//! segment, a reset, packets of a connection begun before the capture, a packet that is not
//! TCP — the same in every link type and file format the analyser reads.

use etherparse::PacketBuilder;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, TsResolution};
use pqtls_capture::analyse;
use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

const MS: u64 = 1_000_000;
const CLIENT: ([u8; 4], u16) = ([10, 0, 0, 1], 5000);
const SERVER: ([u8; 4], u16) = ([10, 0, 0, 2], 80);

#[derive(Clone, Copy)]
enum Flags {
    Syn,
    SynAck(u32),
    Ack(u32),
    Rst,
}

/// One IPv4 packet (no link header): TCP with `flags`, or UDP when `udp`.
fn ip_packet(from: ([u8; 4], u16), to: ([u8; 4], u16), seq: u32, flags: Flags, payload: &[u8]) -> Vec<u8> {
    let b = PacketBuilder::ipv4(from.0, to.0, 64).tcp(from.1, to.1, seq, 65535);
    let b = match flags {
        Flags::Syn => b.syn(),
        Flags::SynAck(ack) => b.syn().ack(ack),
        Flags::Ack(ack) => b.ack(ack),
        Flags::Rst => b.rst(),
    };
    let mut out = Vec::new();
    b.write(&mut out, payload).unwrap();
    out
}

fn udp_packet() -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ipv4([10, 0, 0, 9], [10, 0, 0, 2], 64).udp(53, 53).write(&mut out, b"dns?").unwrap();
    out
}

const REQUEST: &[u8] = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

/// (capture ns, IP packet) of one plain-HTTP connection with everything unusual, and noise.
fn packets() -> Vec<(u64, Vec<u8>)> {
    let (c_isn, s_isn) = (u32::MAX - 10, 900u32); // the client's sequence numbers wrap
    let c = |off: usize| c_isn.wrapping_add(1).wrapping_add(off as u32);
    let s = |off: usize| s_isn.wrapping_add(1).wrapping_add(off as u32);
    let (req1, req2) = REQUEST.split_at(10);
    let (resp1, resp2) = RESPONSE.split_at(20);
    vec![
        (0, ip_packet(CLIENT, SERVER, c_isn, Flags::Syn, b"")),
        (MS, ip_packet(CLIENT, SERVER, c_isn, Flags::Syn, b"")), // the SYN again: lost
        (2 * MS, ip_packet(SERVER, CLIENT, s_isn, Flags::SynAck(c(0)), b"")),
        (2 * MS + 10, udp_packet()),
        (3 * MS, ip_packet(CLIENT, SERVER, c(0), Flags::Ack(s(0)), b"")),
        (4 * MS, ip_packet(CLIENT, SERVER, c(10), Flags::Ack(s(0)), req2)), // ahead of a gap
        (5 * MS, ip_packet(CLIENT, SERVER, c(0), Flags::Ack(s(0)), req1)),  // the gap filled
        (6 * MS, ip_packet(CLIENT, SERVER, c(0), Flags::Ack(s(0)), req1)),  // sent again
        (7 * MS, ip_packet(SERVER, CLIENT, s(0), Flags::Ack(c(REQUEST.len())), resp1)),
        (8 * MS, ip_packet(SERVER, CLIENT, s(20), Flags::Ack(c(REQUEST.len())), resp2)),
        (8 * MS + 5, ip_packet(([10, 0, 0, 3], 6000), SERVER, 77, Flags::Ack(1), b"older")), // no SYN seen
        (9 * MS, ip_packet(CLIENT, SERVER, c(REQUEST.len()), Flags::Rst, b"")),
    ]
}

const EPOCH_NS: u64 = 1_700_000_000 * 1_000_000_000;

fn write_pcap(path: &Path, datalink: DataLink, frame: impl Fn(&[u8]) -> Vec<u8>) {
    let header =
        PcapHeader { datalink, ts_resolution: TsResolution::NanoSecond, snaplen: 262_144, ..PcapHeader::default() };
    let mut w = PcapWriter::with_header(std::fs::File::create(path).unwrap(), header).unwrap();
    for (ts, ip) in packets() {
        let data = frame(&ip);
        w.write_packet(&PcapPacket::new(Duration::from_nanos(EPOCH_NS + ts), data.len() as u32, &data)).unwrap();
    }
}

fn ethernet(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend([0x08, 0x00]);
    f.extend_from_slice(ip);
    f
}

fn sll2(ip: &[u8]) -> Vec<u8> {
    // Linux cooked v2: protocol, reserved, interface index, ARPHRD, packet type, address length, address.
    let mut f = vec![0x08, 0x00, 0, 0, 0, 0, 0, 1, 0x03, 0x04, 0, 6];
    f.extend([0u8; 8]);
    f.extend_from_slice(ip);
    f
}

fn check(path: &Path, what: &str) {
    let a = analyse(path, None).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(a.packets, 12, "{what}");
    assert_eq!(a.connections.len(), 1, "{what}: {:#?}", a.connections);
    let c = &a.connections[0];
    assert!(!c.tls, "{what}");
    assert_eq!((c.syn_retransmissions, c.retransmissions_client, c.out_of_order, c.reset), (1, 1, 1, true), "{what}");
    assert_eq!((c.syn_ns, c.syn_ack_ns), (0, Some(2 * MS)), "{what}");
    assert_eq!((c.client_to_server_bytes, c.server_to_client_bytes), (REQUEST.len() as u64, RESPONSE.len() as u64));
    assert!(c.problems.is_empty(), "{what}: {:?}", c.problems);
    let x = &a.anomalies;
    assert_eq!(
        (x.syn_retransmissions, x.retransmissions, x.out_of_order, x.resets, x.packets_without_syn, x.not_tcp_packets),
        (1, 1, 1, 1, 1, 1),
        "{what}: {x:?}"
    );
    assert_eq!(c.transactions.len(), 1, "{what}");
    let t = &c.transactions[0];
    assert_eq!((t.request_bytes, t.response_bytes), (REQUEST.len() as u64, RESPONSE.len() as u64));
    let tl = t.timeline;
    assert_eq!(
        (tl.connect_start_ns, tl.connected_ns, tl.client_hello_ns, tl.request_ns, tl.first_byte_ns, tl.last_byte_ns),
        (Some(0), Some(2 * MS), None, 5 * MS, 7 * MS, 8 * MS),
        "{what}"
    );
    let l = tl.layers().unwrap();
    assert_eq!(
        (l.tcp_ns, l.tls_ns, l.tls_to_http_ns, l.http_first_byte_ns, l.http_ns),
        (2 * MS, 0, 3 * MS, 2 * MS, 3 * MS)
    );
    assert_eq!(a.origin_unix_ns, EPOCH_NS);
}

#[test]
fn anomalies_are_counted_and_segments_reassembled_in_every_link_type_and_format() {
    let dir = tempfile::tempdir().unwrap();
    let eth = dir.path().join("eth.pcap");
    write_pcap(&eth, DataLink::ETHERNET, ethernet);
    check(&eth, "Ethernet pcap");
    let any = dir.path().join("sll2.pcap");
    write_pcap(&any, DataLink::LINUX_SLL2, sll2);
    check(&any, "Linux cooked v2 pcap");
    let raw = dir.path().join("raw.pcap");
    write_pcap(&raw, DataLink::RAW, |ip| ip.to_vec());
    check(&raw, "raw IP pcap");

    // pcapng with nanosecond timestamps declared by if_tsresol (the default would be µs).
    let ng = dir.path().join("eth.pcapng");
    let mut w = PcapNgWriter::new(std::fs::File::create(&ng).unwrap()).unwrap();
    let idb = InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen: 262_144,
        options: vec![InterfaceDescriptionOption::IfTsResol(9)],
    };
    w.write_pcapng_block(idb).unwrap();
    for (ts, ip) in packets() {
        let data = ethernet(&ip);
        let epb = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_nanos(EPOCH_NS + ts),
            original_len: data.len() as u32,
            data: Cow::Owned(data),
            options: vec![],
        };
        w.write_pcapng_block(epb).unwrap();
    }
    drop(w);
    check(&ng, "Ethernet pcapng");

    // A link type the analyser does not read is named.
    let wifi = dir.path().join("wifi.pcap");
    write_pcap(&wifi, DataLink::IEEE802_11, |ip| ip.to_vec());
    let e = analyse(&wifi, None).unwrap_err().to_string();
    assert!(e.contains("IEEE802_11") && e.contains("not supported"), "{e}");
    // An empty file.
    let empty = dir.path().join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    let e = analyse(&empty, None).unwrap_err().to_string();
    assert!(e.contains("an empty capture"), "{e}");
}
