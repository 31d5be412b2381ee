//! Reading a capture file: pcap or pcapng (pcap-file), link layers Ethernet, Linux cooked
//! v1/v2 (`tcpdump -i any`), BSD loopback (NULL/LOOP) and raw IP, packets parsed down to TCP
//! with etherparse. Only the 20-byte Linux cooked v2 header and the 4-byte loopback family
//! are stepped over here (etherparse has no slicer for them); everything from the IP header on
//! is etherparse's.

use etherparse::{EtherType, NetSlice, SlicedPacket, TransportSlice};
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{DataLink, PcapError};
use pqtls_core::{Error, Result};
use std::fs::File;
use std::io::{BufReader, Read};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

/// The link layers a capture may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    Ethernet,
    LinuxSll,
    LinuxSll2,
    /// BSD loopback: a 4-byte address family in host order (NULL), or network order (LOOP).
    Null,
    /// Raw IPv4 or IPv6, no link header (RAW, IPV4, IPV6).
    Raw,
}

impl Link {
    fn from_datalink(dl: DataLink) -> std::result::Result<Link, String> {
        Ok(match dl {
            DataLink::ETHERNET => Link::Ethernet,
            DataLink::LINUX_SLL => Link::LinuxSll,
            DataLink::LINUX_SLL2 => Link::LinuxSll2,
            DataLink::NULL | DataLink::LOOP => Link::Null,
            DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => Link::Raw,
            other => {
                return Err(format!(
                    "link type {other:?} is not supported (supported: Ethernet, Linux cooked v1/v2 \
                     from `tcpdump -i any`, loopback NULL/LOOP, raw IP)"
                ))
            }
        })
    }
}

/// One TCP segment of a packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment<'a> {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub syn: bool,
    pub ack: bool,
    pub fin: bool,
    pub rst: bool,
    pub payload: &'a [u8],
}

/// What a packet turned out to be.
#[derive(Debug)]
pub enum Parsed<'a> {
    Tcp(Segment<'a>),
    /// IP but not TCP, or not IP (ARP, …): not ours to follow.
    Other,
    /// The packet could not be parsed (cut short by the snap length, malformed): counted.
    Unparsed(String),
}

/// Parses one captured packet of link type `link` down to its TCP segment.
pub fn parse(link: Link, data: &[u8]) -> Parsed<'_> {
    let sliced = match link {
        Link::Ethernet => SlicedPacket::from_ethernet(data),
        Link::LinuxSll => SlicedPacket::from_linux_sll(data),
        // Linux cooked v2: protocol type (2 bytes, network order), then 18 more header bytes.
        Link::LinuxSll2 if data.len() >= 20 => {
            SlicedPacket::from_ether_type(EtherType(u16::from_be_bytes([data[0], data[1]])), &data[20..])
        }
        Link::Null if data.len() >= 4 => SlicedPacket::from_ip(&data[4..]),
        Link::Raw => SlicedPacket::from_ip(data),
        Link::LinuxSll2 | Link::Null => {
            return Parsed::Unparsed(format!("{} bytes: shorter than its link header", data.len()))
        }
    };
    let p = match sliced {
        Ok(p) => p,
        Err(e) => return Parsed::Unparsed(e.to_string()),
    };
    let (src, dst): (IpAddr, IpAddr) = match &p.net {
        Some(NetSlice::Ipv4(ip)) => (ip.header().source_addr().into(), ip.header().destination_addr().into()),
        Some(NetSlice::Ipv6(ip)) => (ip.header().source_addr().into(), ip.header().destination_addr().into()),
        _ => return Parsed::Other,
    };
    match p.transport {
        Some(TransportSlice::Tcp(t)) => Parsed::Tcp(Segment {
            src: SocketAddr::new(src, t.source_port()),
            dst: SocketAddr::new(dst, t.destination_port()),
            seq: t.sequence_number(),
            syn: t.syn(),
            ack: t.ack(),
            fin: t.fin(),
            rst: t.rst(),
            payload: t.payload(),
        }),
        _ => Parsed::Other,
    }
}

/// A capture file's frame: what it is, and how many packets it had.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileSummary {
    /// `pcap` or `pcapng`.
    pub format: &'static str,
    pub packets: u64,
    /// The link types seen (one for pcap; one per interface for pcapng).
    pub links: Vec<String>,
}

const PCAP_MAGICS: [[u8; 4]; 4] =
    [[0xd4, 0xc3, 0xb2, 0xa1], [0xa1, 0xb2, 0xc3, 0xd4], [0x4d, 0x3c, 0xb2, 0xa1], [0xa1, 0xb2, 0x3c, 0x4d]];
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// Calls `each(ts_ns, link, data)` for every packet of the pcap or pcapng file at `path`, in
/// file order (`ts_ns`: since the Unix epoch). A file that is neither, a link type this crate
/// does not read, or a file cut short (a packet or block incomplete) is an error naming the
/// file and how many whole packets came before the problem.
pub fn read_packets(path: &Path, mut each: impl FnMut(u64, Link, &[u8])) -> Result<FileSummary> {
    let open = || File::open(path).map_err(|e| Error::io(format!("opening the capture {}", path.display()), e));
    let mut magic = [0u8; 4];
    let got = read_up_to(&mut open()?, &mut magic)
        .map_err(|e| Error::io(format!("reading the capture {}", path.display()), e))?;
    let what = |s: &str| Error::Invalid(format!("{}: {s}", path.display()));
    if got < 4 {
        return Err(what(&format!(
            "not a capture file: {got} bytes (an empty capture — was tcpdump stopped before it wrote its header?)"
        )));
    }
    let reader = BufReader::with_capacity(1 << 20, open()?);
    if PCAP_MAGICS.contains(&magic) {
        read_pcap(reader, &mut each).map_err(|e| what(&e))
    } else if magic == PCAPNG_MAGIC {
        read_pcapng(reader, &mut each).map_err(|e| what(&e))
    } else {
        Err(what(&format!(
            "not a pcap or pcapng file (it starts with {:02x} {:02x} {:02x} {:02x}; a pcap starts with \
             d4 c3 b2 a1 or a1 b2 c3 d4, a pcapng with 0a 0d 0d 0a)",
            magic[0], magic[1], magic[2], magic[3]
        )))
    }
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn problem(e: &PcapError, packets: u64, unit: &str) -> String {
    match e {
        PcapError::IncompleteBuffer => truncated(packets, unit),
        PcapError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => truncated(packets, unit),
        other => format!("unreadable after {packets} whole packets: {unit} {}: {other}", packets + 1),
    }
}

fn truncated(packets: u64, unit: &str) -> String {
    format!(
        "the capture is truncated: {unit} {} is cut short after {packets} whole packets (was tcpdump killed \
         before it flushed, or the file copied while it was written?)",
        packets + 1
    )
}

fn read_pcap<R: Read>(reader: R, each: &mut dyn FnMut(u64, Link, &[u8])) -> std::result::Result<FileSummary, String> {
    let mut r =
        PcapReader::new(reader).map_err(|e| format!("not a readable pcap header: {}", problem(&e, 0, "the header")))?;
    let header = r.header();
    let link = Link::from_datalink(header.datalink)?;
    let mut packets = 0;
    while let Some(p) = r.next_packet() {
        let p = p.map_err(|e| problem(&e, packets, "packet"))?;
        // pcap-file gives nanoseconds for both the µs and the ns timestamp resolutions.
        each(p.timestamp.as_nanos() as u64, link, &p.data);
        packets += 1;
    }
    Ok(FileSummary { format: "pcap", packets, links: vec![format!("{:?}", header.datalink)] })
}

/// Interfaces of the current pcapng section: link and timestamp resolution.
struct Interface {
    link: std::result::Result<Link, String>,
    /// if_tsresol: the low 7 bits are the exponent, the top bit says base 2 (else base 10).
    tsresol: u8,
}

/// An Enhanced Packet Block's raw timestamp in ns. pcap-file hands the raw 64-bit count over
/// as if it were ns; its unit is the interface's if_tsresol (default 10⁻⁶ s).
fn pcapng_ns(raw: u128, tsresol: u8) -> u64 {
    let exp = (tsresol & 0x7f) as u32;
    let ns = if tsresol & 0x80 != 0 {
        raw.saturating_mul(1_000_000_000) >> exp.min(127)
    } else if exp <= 9 {
        raw.saturating_mul(10u128.pow(9 - exp))
    } else {
        raw / 10u128.pow((exp - 9).min(38))
    };
    ns.min(u64::MAX as u128) as u64
}

fn read_pcapng<R: Read>(reader: R, each: &mut dyn FnMut(u64, Link, &[u8])) -> std::result::Result<FileSummary, String> {
    let mut r = PcapNgReader::new(reader)
        .map_err(|e| format!("not a readable pcapng section header: {}", problem(&e, 0, "the header")))?;
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut links = Vec::new();
    let mut packets = 0;
    while let Some(block) = r.next_block() {
        let block = block.map_err(|e| problem(&e, packets, "block after packet"))?;
        match block {
            Block::SectionHeader(_) => interfaces.clear(),
            Block::InterfaceDescription(idb) => {
                let tsresol = idb
                    .options
                    .iter()
                    .find_map(|o| match o {
                        InterfaceDescriptionOption::IfTsResol(r) => Some(*r),
                        _ => None,
                    })
                    .unwrap_or(6);
                let name = format!("{:?}", idb.linktype);
                if !links.contains(&name) {
                    links.push(name);
                }
                interfaces.push(Interface { link: Link::from_datalink(idb.linktype), tsresol });
            }
            Block::EnhancedPacket(epb) => {
                let Some(iface) = interfaces.get(epb.interface_id as usize) else {
                    return Err(format!(
                        "packet {} names interface {} that no block described",
                        packets + 1,
                        epb.interface_id
                    ));
                };
                let link = iface.link.clone()?;
                each(pcapng_ns(epb.timestamp.as_nanos(), iface.tsresol), link, &epb.data);
                packets += 1;
            }
            Block::SimplePacket(_) | Block::Packet(_) => {
                return Err(format!(
                    "packet {} is in a simple or obsolete packet block, without a usable timestamp; \
                     write the capture with tcpdump -w (pcap) or dumpcap (enhanced packet blocks)",
                    packets + 1
                ))
            }
            _ => {}
        }
    }
    Ok(FileSummary { format: "pcapng", packets, links })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcapng_timestamps_follow_the_interface_resolution() {
        assert_eq!(pcapng_ns(1_500_000, 6), 1_500_000_000);
        assert_eq!(pcapng_ns(1_500_000_123, 9), 1_500_000_123);
        assert_eq!(pcapng_ns(1 << 30, 0x80 | 30), 1_000_000_000);
        assert_eq!(pcapng_ns(123_456, 12), 123);
    }

    #[test]
    fn link_types_beyond_ours_are_named() {
        let e = Link::from_datalink(DataLink::IEEE802_11).unwrap_err();
        assert!(e.contains("IEEE802_11") && e.contains("Linux cooked"), "{e}");
    }
}
