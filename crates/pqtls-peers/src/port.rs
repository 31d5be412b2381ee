//! Free ports for peers that are told where to listen (nginx, HAProxy, `openssl s_server`):
//! a port is found free, released, and bound again by the peer a moment later. A port the
//! kernel hands out (`bind` to port 0, or a `connect`) comes from its ephemeral range
//! (`net.ipv4.ip_local_port_range`), where any other program's `bind(0)` or outgoing
//! connection may take it in that moment. The ports chosen here lie below that range, at
//! random, so only a program that picks the same port by number can.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};

/// The lowest port chosen (below it: registered services).
const LOWEST_PORT: u16 = 10_000;
/// Candidates tried before falling back to a kernel-chosen port.
const TRIES: u32 = 64;

/// A port on `ip` that nothing listens on (`udp`: nothing bound), outside the kernel's
/// ephemeral range when there is room below it; otherwise one the kernel picks.
pub fn free_port(ip: IpAddr, udp: bool) -> io::Result<u16> {
    let (ephemeral_low, _) = ephemeral_range();
    if ephemeral_low > LOWEST_PORT + 1000 {
        let span = u64::from(ephemeral_low - LOWEST_PORT);
        let mut random = Random::new();
        for _ in 0..TRIES {
            let port = LOWEST_PORT + (random.next() % span) as u16;
            if bind(SocketAddr::new(ip, port), udp).is_ok() {
                return Ok(port);
            }
        }
    }
    bind(SocketAddr::new(ip, 0), udp)
}

/// Binds `addr` and lets go at once; the port bound.
fn bind(addr: SocketAddr, udp: bool) -> io::Result<u16> {
    if udp {
        UdpSocket::bind(addr)?.local_addr().map(|a| a.port())
    } else {
        TcpListener::bind(addr)?.local_addr().map(|a| a.port())
    }
}

/// The kernel's ephemeral port range (Linux's default when it cannot be read).
fn ephemeral_range() -> (u16, u16) {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut it = text.split_whitespace().map(str::parse::<u16>);
    match (it.next(), it.next()) {
        (Some(Ok(low)), Some(Ok(high))) if low <= high => (low, high),
        _ => (32_768, 60_999),
    }
}

/// Random numbers from the standard library's randomly keyed hasher (a new key per
/// `RandomState`): enough to spread ports, no crate needed.
struct Random(std::collections::hash_map::RandomState, u64);

impl Random {
    fn new() -> Random {
        Random(std::collections::hash_map::RandomState::new(), 0)
    }

    fn next(&mut self) -> u64 {
        use std::hash::BuildHasher;
        self.1 += 1;
        self.0.hash_one(self.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_free_and_below_the_ephemeral_range() {
        let (low, _) = ephemeral_range();
        let lo: IpAddr = [127, 0, 0, 1].into();
        for udp in [false, true] {
            let ports: Vec<u16> = (0..20).map(|_| free_port(lo, udp).unwrap()).collect();
            for &p in &ports {
                assert!(p != 0 && (low <= LOWEST_PORT + 1000 || (LOWEST_PORT..low).contains(&p)), "{p}");
                bind(SocketAddr::new(lo, p), udp).unwrap();
            }
            // Spread, not one port over and over.
            let distinct: std::collections::BTreeSet<_> = ports.iter().collect();
            assert!(distinct.len() > 15, "{ports:?}");
        }
    }

    #[test]
    fn a_port_taken_is_not_chosen() {
        let lo: IpAddr = [127, 0, 0, 1].into();
        // Hold a few hundred ports of the range: none of them comes back.
        let held: Vec<TcpListener> =
            (0..300).filter_map(|i| TcpListener::bind(SocketAddr::new(lo, LOWEST_PORT + i)).ok()).collect();
        let taken: std::collections::BTreeSet<u16> = held.iter().map(|l| l.local_addr().unwrap().port()).collect();
        for _ in 0..200 {
            assert!(!taken.contains(&free_port(lo, false).unwrap()));
        }
    }
}
