//! The lab's topology: client, router and server namespaces joined by two veth pairs; rate,
//! loss and delay applied in the router; initcwnd, congestion control and buffers on the
//! client's and server's routes.
//!
//! ```text
//!  client ns                 router ns                    server ns
//!  pq-c 198.18.1.2 ──veth── pq-rc 198.18.1.1
//!                            pq-rs 198.18.2.1 ──veth──  pq-s 198.18.2.2
//! ```
//! 198.18.0.0/15 is the range RFC 2544 sets aside for benchmarking: no real host has it.
//! Every lab uses the same addresses, each in its own namespaces, so concurrent labs never
//! collide.

use crate::cmd;
use crate::emulator::{DelayConfig, Emulator, EmulatorReport};
use crate::error::{Error, Result};
use crate::netns::{self, NsThread};
pub use pqtls_core::link::{LabSetup, LinkSpec};
use pqtls_core::scenario::NetworkSpec;
use pqtls_core::units;
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
pub const ROUTER_CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
pub const ROUTER_SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 1);
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
pub const CLIENT_IF: &str = "pq-c";
pub const SERVER_IF: &str = "pq-s";
/// The router's interface towards the client (its egress carries server → client traffic).
pub const ROUTER_CLIENT_IF: &str = "pq-rc";
/// The router's interface towards the server.
pub const ROUTER_SERVER_IF: &str = "pq-rs";
/// Every namespace of a lab is named `pqtls-<pid>-<n>-<c|r|s>`.
pub const PREFIX: &str = "pqtls-";
/// Largest TCP buffers in the client and server namespaces (tcp_rmem/tcp_wmem max): far
/// above a 1 Gbit/s × 150 ms window, so the window never caps a flight.
pub const TCP_BUFFER_MAX_BYTES: u64 = 64 << 20;
/// Bounds of what the lab accepts (beyond them the answer is nonsense, not a slow link).
pub const MAX_RTT_NS: u64 = 10_000_000_000;
pub const MIN_BITS_PER_S: u64 = 100_000;
pub const MAX_BITS_PER_S: u64 = 100_000_000_000;
pub const MAX_LOSS: f64 = 0.5;

/// Where code runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Client,
    Router,
    Server,
}

impl Side {
    fn letter(self) -> char {
        match self {
            Side::Client => 'c',
            Side::Router => 'r',
            Side::Server => 's',
        }
    }
}

/// What emulates the delay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DelayBackend {
    /// netem when the kernel has it and no jitter is asked (netem's jitter reorders packets),
    /// else our NFQUEUE emulator.
    #[default]
    Auto,
    Nfqueue,
    Netem,
}

/// Choices beyond the link itself.
#[derive(Clone, Debug)]
pub struct LabOptions {
    /// TCP congestion control of every connection in the lab (set on the client's and the
    /// server's routes, so programs need not set it per socket). New namespaces may default
    /// to another one than the host and refuse to change their default.
    pub congestion_control: String,
    /// Initial congestion and receive windows (segments) of the client's route; `None`: the
    /// network spec's initcwnd, else the kernel's default.
    pub client_initcwnd: Option<u64>,
    pub server_initcwnd: Option<u64>,
    pub delay: DelayBackend,
    /// CPU the delay emulator is pinned to; `None`: the last CPU this process may use.
    pub emulator_cpu: Option<usize>,
    /// Seed of the jitter draws.
    pub seed: u64,
    /// The rate limiter's queue (tbf `limit`); `None`: one bandwidth-delay product, at least
    /// 64 KiB.
    pub queue_limit_bytes: Option<u64>,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            congestion_control: "cubic".into(),
            client_initcwnd: None,
            server_initcwnd: None,
            delay: DelayBackend::Auto,
            emulator_cpu: None,
            seed: 0,
            queue_limit_bytes: None,
        }
    }
}

/// A running lab. Dropping it tears everything down (also when unwinding from a panic).
pub struct Lab {
    base: String,
    spec: LinkSpec,
    setup: LabSetup,
    emulator: Option<Emulator>,
    netem: bool,
    down: bool,
}

/// An error saying what the lab needs when this process is not root.
pub fn require_root() -> Result<()> {
    check_root()
}

fn check_root() -> Result<()> {
    if nix::unistd::geteuid().is_root() {
        Ok(())
    } else {
        Err(Error::Privilege(
            "the network lab needs root (CAP_SYS_ADMIN for namespaces, CAP_NET_ADMIN for links, qdiscs and \
             iptables): run it with sudo, as root"
                .into(),
        ))
    }
}

/// Refuses links that make no sense before building anything, saying what would work.
pub fn validate(spec: &LinkSpec) -> Result<()> {
    if let Some(rtt) = spec.rtt_ns {
        if rtt > MAX_RTT_NS {
            return Err(Error::Invalid(format!(
                "RTT {} is above the lab's {}; e.g. 150ms",
                units::format_duration(rtt),
                units::format_duration(MAX_RTT_NS)
            )));
        }
    }
    let one_way = spec.rtt_ns.unwrap_or(0) / 2;
    if spec.jitter_ns > one_way {
        return Err(Error::Invalid(format!(
            "jitter {} is larger than the one-way delay {} (half the RTT): a packet cannot leave before it came; \
             use a jitter ≤ {}",
            units::format_duration(spec.jitter_ns),
            units::format_duration(one_way),
            units::format_duration(one_way)
        )));
    }
    if let Some(r) = spec.bits_per_s {
        if !(MIN_BITS_PER_S..=MAX_BITS_PER_S).contains(&r) {
            return Err(Error::Invalid(format!(
                "rate {} is outside what the lab emulates ({} … {}); e.g. 100mbit",
                units::format_bits(r),
                units::format_bits(MIN_BITS_PER_S),
                units::format_bits(MAX_BITS_PER_S)
            )));
        }
    }
    if !(0.0..=MAX_LOSS).contains(&spec.loss) || spec.loss.is_nan() {
        return Err(Error::Invalid(format!(
            "loss {}% is outside 0 … {}% (TCP does not get through beyond); e.g. 0.5%",
            spec.loss * 100.0,
            MAX_LOSS * 100.0
        )));
    }
    if let Some(0) = spec.initcwnd {
        return Err(Error::Invalid("initcwnd 0 would never send; e.g. 10 (the kernel's default)".into()));
    }
    Ok(())
}

/// `ip route add|replace default via GW [initcwnd N initrwnd N] congctl lock CC` in `ns`.
fn default_route(ns: &str, verb: &str, gw: Ipv4Addr, initcwnd: Option<u64>, congestion_control: &str) -> Result<()> {
    let gw = gw.to_string();
    let mut route = vec!["route", verb, "default", "via", &gw];
    let w = initcwnd.map(|n| n.to_string());
    if let Some(w) = &w {
        route.extend(["initcwnd", w, "initrwnd", w]);
    }
    // `lock`: the route's congestion control wins over the namespace's default.
    route.extend(["congctl", "lock", congestion_control]);
    cmd::ip(ns, &route).map(|_| ())
}

/// Whether the kernel has sch_netem (tried on the router's loopback).
fn netem_available(router: &str) -> bool {
    let ok = cmd::tc(router, &["qdisc", "add", "dev", "lo", "root", "handle", "1:", "netem", "delay", "0ms"]).is_ok();
    if ok {
        let _ = cmd::tc(router, &["qdisc", "del", "dev", "lo", "root"]);
    }
    ok
}

/// The last CPU this process may run on.
fn last_allowed_cpu() -> Option<usize> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    (0..nix::sched::CpuSet::count()).rev().find(|&c| set.is_set(c).unwrap_or(false))
}

impl Lab {
    /// Builds the lab for `network` (see the module's picture). Leftovers of killed runs are
    /// removed first ([`clean`]).
    pub fn up(network: &NetworkSpec, options: &LabOptions) -> Result<Lab> {
        check_root()?;
        let spec = LinkSpec::from(network);
        validate(&spec)?;
        clean()?;
        let pid = std::process::id();
        let mut rng = fastrand::Rng::new();
        // A random run number, retried on the rare collision: no process-wide counter.
        let mut lab = None;
        for _ in 0..16 {
            let base = format!("{PREFIX}{pid}-{}", rng.u32(..1_000_000));
            if netns::path(&format!("{base}-c")).exists() {
                continue;
            }
            lab = Some(Lab {
                base,
                spec: spec.clone(),
                setup: LabSetup {
                    namespaces: Vec::new(),
                    delay_backend: "none".into(),
                    netem_available: false,
                    rate_bits_per_s: spec.bits_per_s,
                    tbf_burst_bytes: None,
                    tbf_limit_bytes: None,
                    loss_probability: spec.loss,
                    congestion_control: options.congestion_control.clone(),
                    client_initcwnd: options.client_initcwnd.or(spec.initcwnd),
                    server_initcwnd: options.server_initcwnd.or(spec.initcwnd),
                    tcp_rmem: String::new(),
                    tcp_wmem: String::new(),
                    offloads_off: Vec::new(),
                },
                emulator: None,
                netem: false,
                down: false,
            });
            break;
        }
        let mut lab = lab.ok_or_else(|| Error::Invalid("no free lab name after 16 tries".into()))?;
        // From here on, an error drops `lab`, which removes whatever was built.
        lab.build(options)?;
        Ok(lab)
    }

    fn build(&mut self, options: &LabOptions) -> Result<()> {
        let (c, r, s) = (self.ns(Side::Client), self.ns(Side::Router), self.ns(Side::Server));
        for ns in [&c, &r, &s] {
            netns::add(ns)?;
            self.setup.namespaces.push(ns.clone());
        }
        cmd::ip(&c, &["link", "add", CLIENT_IF, "type", "veth", "peer", "name", ROUTER_CLIENT_IF, "netns", &r])?;
        cmd::ip(&s, &["link", "add", SERVER_IF, "type", "veth", "peer", "name", ROUTER_SERVER_IF, "netns", &r])?;
        for ns in [&c, &r, &s] {
            cmd::sysctl(ns, "net.ipv6.conf.all.disable_ipv6", "1")?;
            cmd::ip(ns, &["link", "set", "lo", "up"])?;
        }
        cmd::sysctl(&r, "net.ipv4.ip_forward", "1")?;
        let addr = |a: Ipv4Addr| format!("{a}/24");
        for (ns, dev, a) in [
            (&c, CLIENT_IF, CLIENT_ADDR),
            (&r, ROUTER_CLIENT_IF, ROUTER_CLIENT_ADDR),
            (&r, ROUTER_SERVER_IF, ROUTER_SERVER_ADDR),
            (&s, SERVER_IF, SERVER_ADDR),
        ] {
            cmd::ip(ns, &["addr", "add", &addr(a), "dev", dev])?;
            // Segments on the wire as a real NIC would send them: no GSO/TSO super-packets
            // through the rate limiter and the emulator, no GRO merging them back.
            cmd::run_in(ns, "ethtool", &["-K", dev, "gso", "off", "gro", "off", "tso", "off"])?;
            self.setup.offloads_off.push(format!("{dev}: gso gro tso"));
            cmd::ip(ns, &["link", "set", dev, "up"])?;
        }
        let max = TCP_BUFFER_MAX_BYTES.to_string();
        for (ns, gw, initcwnd) in
            [(&c, ROUTER_CLIENT_ADDR, self.setup.client_initcwnd), (&s, ROUTER_SERVER_ADDR, self.setup.server_initcwnd)]
        {
            // Every connection starts from the route's window: no ssthresh or RTT remembered
            // from an earlier connection to the same peer (a transfer after a lossy one would
            // otherwise start in congestion avoidance).
            cmd::sysctl(ns, "net.ipv4.tcp_no_metrics_save", "1")?;
            cmd::sysctl(ns, "net.core.rmem_max", &max)?;
            cmd::sysctl(ns, "net.core.wmem_max", &max)?;
            self.setup.tcp_rmem = cmd::sysctl(ns, "net.ipv4.tcp_rmem", &format!("4096 131072 {max}"))?;
            self.setup.tcp_wmem = cmd::sysctl(ns, "net.ipv4.tcp_wmem", &format!("4096 16384 {max}"))?;
            default_route(ns, "add", gw, initcwnd, &options.congestion_control).map_err(|e| match e {
                Error::Command { stderr, .. } => Error::Invalid(format!(
                    "congestion control '{}' not usable in the lab ({stderr}); the kernel has: {}",
                    options.congestion_control,
                    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                        .unwrap_or_default()
                        .trim()
                )),
                e => e,
            })?;
        }

        // Delay: netem or our emulator.
        let one_way = self.spec.rtt_ns.unwrap_or(0) / 2;
        self.setup.netem_available = netem_available(&r);
        let want_delay = one_way > 0 || self.spec.jitter_ns > 0;
        self.netem =
            want_delay
                && match options.delay {
                    DelayBackend::Netem if !self.setup.netem_available => return Err(Error::Invalid(
                        "netem was asked for but this kernel has no sch_netem; use the NFQUEUE emulator (the default)"
                            .into(),
                    )),
                    DelayBackend::Netem => true,
                    DelayBackend::Nfqueue => false,
                    DelayBackend::Auto => self.setup.netem_available && self.spec.jitter_ns == 0,
                };
        self.setup.delay_backend = match (want_delay, self.netem, self.setup.netem_available) {
            (false, _, _) => "none (no delay asked)".into(),
            (true, true, _) => "netem".into(),
            (true, false, false) => "nfqueue (the kernel has no sch_netem)".into(),
            (true, false, true) if self.spec.jitter_ns > 0 => "nfqueue (netem's jitter would reorder packets)".into(),
            (true, false, true) => "nfqueue (asked for)".into(),
        };

        // Rate: tbf on the router's egress each way (under netem when netem delays).
        if let Some(bps) = self.spec.bits_per_s {
            let burst = (bps / 8 / 1000).max(2 * 1514);
            let bdp = (bps as u128 * self.spec.rtt_ns.unwrap_or(0) as u128 / 8 / 1_000_000_000) as u64;
            let limit = options.queue_limit_bytes.unwrap_or(bdp.max(64 << 10));
            self.setup.tbf_burst_bytes = Some(burst);
            self.setup.tbf_limit_bytes = Some(limit);
            for dev in [ROUTER_CLIENT_IF, ROUTER_SERVER_IF] {
                let (rate, burst, limit) = (format!("{bps}bit"), burst.to_string(), limit.to_string());
                let mut args = vec!["qdisc", "add", "dev", dev];
                if self.netem {
                    args.extend(["parent", "1:1", "handle", "10:"]);
                    self.netem_qdisc(&r, dev, one_way)?;
                } else {
                    args.extend(["root", "handle", "1:"]);
                }
                args.extend(["tbf", "rate", &rate, "burst", &burst, "limit", &limit]);
                cmd::tc(&r, &args)?;
            }
        } else if self.netem {
            for dev in [ROUTER_CLIENT_IF, ROUTER_SERVER_IF] {
                self.netem_qdisc(&r, dev, one_way)?;
            }
        }

        if want_delay && !self.netem {
            let cpu = options.emulator_cpu.or_else(last_allowed_cpu);
            let cfg =
                DelayConfig { one_way_delay_ns: one_way, jitter_ns: self.spec.jitter_ns, seed: options.seed, cpu };
            self.emulator = Some(Emulator::start(&r, cfg)?);
        }
        // Loss first (a dropped packet costs the emulator nothing), then the delay queue.
        if self.spec.loss > 0.0 {
            let p = format!("{:.8}", self.spec.loss);
            cmd::iptables(
                &r,
                &["-A", "FORWARD", "-m", "statistic", "--mode", "random", "--probability", &p, "-j", "DROP"],
            )?;
        }
        if self.emulator.is_some() {
            // No --queue-bypass: without the emulator, packets are dropped, never let through
            // undelayed.
            cmd::iptables(&r, &["-A", "FORWARD", "-j", "NFQUEUE", "--queue-num", "0"])?;
        }
        Ok(())
    }

    /// Sets the initial congestion and receive windows of the client's and the server's
    /// routes in place (`None`: the kernel's default), keeping the link and its verification:
    /// a window is a property of new connections, not of the link.
    pub fn set_initcwnd(&mut self, client: Option<u64>, server: Option<u64>) -> Result<()> {
        if client == Some(0) || server == Some(0) {
            return Err(Error::Invalid("initcwnd 0 would never send; e.g. 10 (the kernel's default)".into()));
        }
        if (client, server) == (self.setup.client_initcwnd, self.setup.server_initcwnd) {
            return Ok(());
        }
        let cc = self.setup.congestion_control.clone();
        default_route(&self.ns(Side::Client), "replace", ROUTER_CLIENT_ADDR, client, &cc)?;
        default_route(&self.ns(Side::Server), "replace", ROUTER_SERVER_ADDR, server, &cc)?;
        self.setup.client_initcwnd = client;
        self.setup.server_initcwnd = server;
        self.spec.initcwnd = if client == server { client } else { None };
        Ok(())
    }

    /// Runs `f` on a thread inside `side`'s namespace and waits for it, calling `tick` about
    /// every 100 ms meanwhile (e.g. to forward progress). Unlike [`Lab::spawn_in`], `f` may
    /// borrow: the thread is scoped.
    pub fn within<F, T>(&self, side: Side, f: F, mut tick: impl FnMut()) -> Result<T>
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        let ns = self.ns(side);
        let p = netns::path(&ns);
        let file =
            std::fs::File::open(&p).map_err(|e| Error::io(format!("cannot open namespace {}", p.display()), e))?;
        std::thread::scope(|scope| {
            let what = format!("cannot enter network namespace {ns}");
            let handle = std::thread::Builder::new()
                .name("pqtls-lab".into())
                .spawn_scoped(scope, move || {
                    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                        .map_err(|e| Error::io(what, std::io::Error::from(e)))?;
                    drop(file);
                    Ok(f())
                })
                .map_err(|e| Error::io("cannot start a thread", e))?;
            while !handle.is_finished() {
                tick();
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            handle.join().map_err(|_| Error::Invalid(format!("a thread in the {side:?} namespace panicked")))?
        })
    }

    fn netem_qdisc(&self, router: &str, dev: &str, one_way_ns: u64) -> Result<()> {
        let delay = format!("{}us", one_way_ns / 1000);
        cmd::tc(
            router,
            &["qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay", &delay, "limit", "100000"],
        )
        .map(|_| ())
    }

    /// The namespace of `side` (a name under /var/run/netns).
    pub fn ns(&self, side: Side) -> String {
        format!("{}-{}", self.base, side.letter())
    }

    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }

    pub fn setup(&self) -> &LabSetup {
        &self.setup
    }

    pub fn client_addr(&self) -> Ipv4Addr {
        CLIENT_ADDR
    }

    /// Where a server in the server namespace is reached from the client namespace.
    pub fn server_addr(&self) -> Ipv4Addr {
        SERVER_ADDR
    }

    /// Runs `f` on a new thread inside `side`'s namespace: sockets it opens and threads it
    /// starts are in the lab (e.g. `pqtls_net::Server::start` on the server side, the load
    /// generator on the client side). Join such threads before the lab is dropped.
    pub fn spawn_in<F, T>(&self, side: Side, thread_name: &str, f: F) -> Result<NsThread<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        netns::spawn_in(&self.ns(side), thread_name, f)
    }

    /// Runs `f` inside `side`'s namespace and waits for it.
    pub fn run_in<F, T>(&self, side: Side, f: F) -> Result<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_in(side, "pqtls-lab", f)?
            .join()
            .map_err(|_| Error::Invalid(format!("a thread in the {side:?} namespace panicked")))
    }

    /// A command that runs `program` in `side`'s namespace (`ip netns exec …`), e.g. a
    /// `pqtls serve` child process. The caller must end it before the lab is dropped.
    pub fn command(&self, side: Side, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
        let mut c = std::process::Command::new("ip");
        c.args(["netns", "exec", &self.ns(side)]).arg(program);
        c
    }

    /// The delay emulator's counters and lateness so far.
    pub fn emulator_report(&self) -> EmulatorReport {
        match &self.emulator {
            Some(e) => e.report(),
            None if self.netem => EmulatorReport {
                kind: "netem".into(),
                one_way_delay_ns: self.spec.rtt_ns.unwrap_or(0) / 2,
                ..EmulatorReport::none()
            },
            None => EmulatorReport::none(),
        }
    }

    /// The delay emulator's late releases (`None`: no emulator of ours — netem, or no delay —
    /// whose lateness nothing in the lab can see).
    pub fn late_log(&self) -> Option<std::sync::Arc<dyn pqtls_core::link::LatenessLog>> {
        self.emulator.as_ref().map(|e| e.late_log())
    }

    /// Forgets the emulator's lateness so far (e.g. between verification and an experiment).
    pub fn reset_emulator(&self) {
        if let Some(e) = &self.emulator {
            e.reset();
        }
    }

    /// An error when the emulator stopped (its packets would be dropped).
    pub fn check_emulator(&self) -> Result<()> {
        match &self.emulator {
            Some(e) if !e.is_running() => {
                Err(Error::Invalid("the delay emulator stopped: the link drops every packet".into()))
            }
            _ => Ok(()),
        }
    }

    /// Tears the lab down, reporting what could not be removed.
    pub fn down(mut self) -> Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<()> {
        if self.down {
            return Ok(());
        }
        self.down = true;
        let mut first_error = None;
        if let Some(mut e) = self.emulator.take() {
            if let Err(err) = e.stop() {
                first_error.get_or_insert(err);
            }
        }
        // Deleting a namespace deletes its veths (and their peers), qdiscs and iptables rules.
        for side in [Side::Router, Side::Client, Side::Server] {
            if let Err(err) = netns::delete(&self.ns(side)) {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The rule that keeps the rate measurement's flow out of the loss rule (inserted by
    /// verification while it measures the rate, removed after).
    pub(crate) fn exempt_port(&self, port: u16, on: bool) -> Result<()> {
        let r = self.ns(Side::Router);
        let target = if self.emulator.is_some() { vec!["NFQUEUE", "--queue-num", "0"] } else { vec!["ACCEPT"] };
        let port = port.to_string();
        for dir in ["--sport", "--dport"] {
            let mut args = if on { vec!["-I", "FORWARD", "1"] } else { vec!["-D", "FORWARD"] };
            args.extend(["-p", "tcp", dir, &port, "-j"]);
            args.extend(target.iter().copied());
            cmd::iptables(&r, &args)?;
        }
        Ok(())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// The pid that made a lab namespace, from its name `pqtls-<pid>-<n>-<c|r|s>`.
pub fn owner_pid(ns: &str) -> Option<u32> {
    let rest = ns.strip_prefix(PREFIX)?;
    let mut parts = rest.split('-');
    let pid = parts.next()?.parse().ok()?;
    parts.next()?.parse::<u32>().ok()?;
    matches!(parts.next()?, "c" | "r" | "s").then_some(())?;
    parts.next().is_none().then_some(pid)
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes every lab namespace whose creating process is dead (a killed run's): with them go
/// their veths, qdiscs, iptables rules, and the emulator (a thread of the dead process).
/// Namespaces of running labs are left alone. Returns the names removed.
pub fn clean() -> Result<Vec<String>> {
    check_root()?;
    let mut removed = Vec::new();
    for ns in netns::list()? {
        if let Some(pid) = owner_pid(&ns) {
            if !alive(pid) {
                netns::delete(&ns)?;
                removed.push(ns);
            }
        }
    }
    Ok(removed)
}

/// Lab namespaces that exist now (any owner).
pub fn lab_namespaces() -> Result<Vec<String>> {
    Ok(netns::list()?.into_iter().filter(|n| owner_pid(n).is_some()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rtt_ms: u64, mbit: u64, loss: f64, jitter_ms: u64) -> LinkSpec {
        LinkSpec {
            rtt_ns: Some(rtt_ms * 1_000_000),
            bits_per_s: Some(mbit * 1_000_000),
            loss,
            jitter_ns: jitter_ms * 1_000_000,
            initcwnd: None,
        }
    }

    #[test]
    fn names_carry_their_owner() {
        assert_eq!(owner_pid("pqtls-1234-56-c"), Some(1234));
        assert_eq!(owner_pid("pqtls-1234-56-r"), Some(1234));
        assert_eq!(owner_pid("pqtls-1234-56-x"), None);
        assert_eq!(owner_pid("pqtls-1234-c"), None);
        assert_eq!(owner_pid("pqtls-1234-56-c-d"), None);
        assert_eq!(owner_pid("other-1234-56-c"), None);
    }

    #[test]
    fn absurd_links_are_refused_before_anything_is_built() {
        assert!(validate(&spec(50, 100, 0.005, 1)).is_ok());
        let e = validate(&spec(20_000, 100, 0.0, 0)).unwrap_err().to_string();
        assert!(e.contains("RTT 20000ms") && e.contains("150ms"), "{e}");
        let e = validate(&spec(10, 100, 0.0, 6)).unwrap_err().to_string();
        assert!(e.contains("jitter 6ms") && e.contains("≤ 5ms"), "{e}");
        let e = validate(&spec(10, 200_000, 0.0, 0)).unwrap_err().to_string();
        assert!(e.contains("200gbit") && e.contains("100mbit"), "{e}");
        let e = validate(&spec(10, 100, 0.9, 0)).unwrap_err().to_string();
        assert!(e.contains("90%") && e.contains("50%"), "{e}");
        let mut s = spec(10, 100, 0.0, 0);
        s.initcwnd = Some(0);
        assert!(validate(&s).unwrap_err().to_string().contains("initcwnd 0"));
    }
}
