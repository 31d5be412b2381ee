//! Verification of a link before use: RTT by many UDP probes, rate by a bulk TCP transfer,
//! loss by enough one-way datagrams for a 95 % confidence interval — each compared with
//! what was asked, with stated tolerances ([`Tolerances`]). The verdict logic is pure
//! functions of the measurements, tested on synthetic values.

use crate::cmd;
use crate::emulator::EmulatorReport;
use crate::error::{Error, Result};
use crate::topology::{Lab, LinkSpec, Side, MAX_RTT_NS, ROUTER_CLIENT_IF, ROUTER_SERVER_IF};
pub use pqtls_core::link::{
    show, Check, LinkReport, LossDirection, LossMeasurement, RateMeasurement, RttMeasurement, Tolerances,
};
use pqtls_core::units;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Ports the verification uses in the lab's namespaces (nothing else listens there).
pub const ECHO_PORT: u16 = 40_007;
pub const RATE_PORT: u16 = 40_001;
pub const LOSS_PORT: u16 = 40_002;
/// The concurrent bulk flow's port ([`VerifyOptions::concurrent_flow_bits_per_s`]).
pub const FLOW_PORT: u16 = 40_003;

/// How much to measure.
#[derive(Clone, Debug)]
pub struct VerifyOptions {
    pub tolerances: Tolerances,
    /// RTT probes (UDP ping-pong, client → server → client).
    pub rtt_probes: u32,
    pub probe_interval: Duration,
    /// Rate: the bulk transfer runs this long before its measurement window (at least ten
    /// RTTs are added, for slow start)…
    pub rate_warmup: Duration,
    /// …and is measured over this window.
    pub rate_window: Duration,
    /// Most datagrams per direction for the loss measurement, and the longest it may take.
    pub loss_max_datagrams: u64,
    pub loss_max_time: Duration,
    /// A bulk TCP flow server → client paced at this rate while the RTT is probed (the
    /// emulator's accuracy under load); `None`: idle probes.
    pub concurrent_flow_bits_per_s: Option<u64>,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            tolerances: Tolerances::default(),
            rtt_probes: 200,
            probe_interval: Duration::from_millis(2),
            rate_warmup: Duration::from_millis(1000),
            rate_window: Duration::from_millis(1000),
            loss_max_datagrams: 40_000,
            loss_max_time: Duration::from_secs(5),
            concurrent_flow_bits_per_s: None,
        }
    }
}

/// The machine's CPU time so far (the `cpu` line of /proc/stat, in ticks): all of it, and the
/// hypervisor's steal.
#[derive(Clone, Copy, Debug, PartialEq)]
struct CpuTimes {
    total: u64,
    steal: u64,
}

impl CpuTimes {
    /// Parses the `cpu` line: user nice system idle iowait irq softirq steal (guest time is
    /// inside user already).
    fn parse(stat: &str) -> Option<CpuTimes> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line.split_whitespace().skip(1).take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
        (v.len() == 8).then(|| CpuTimes { total: v.iter().sum(), steal: v[7] })
    }

    /// The share of the CPU time since `before` that was steal (`None` when no time passed).
    fn steal_since(&self, before: &CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(before.total)?;
        let steal = self.steal.checked_sub(before.steal)?;
        (total > 0).then(|| steal as f64 / total as f64)
    }
}

fn cpu_times() -> Option<CpuTimes> {
    CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The confidence levels [`wilson`] knows, with the z of their two-sided normal interval.
pub const CONFIDENCE_LEVELS: [(f64, f64); 5] =
    [(0.90, 1.6449), (0.95, 1.9600), (0.99, 2.5758), (0.999, 3.2905), (0.999_999, 4.8916)];

/// z of a two-sided normal interval at `confidence`, one of [`CONFIDENCE_LEVELS`] (the levels
/// are constants of this crate, not input: another is a programming error, named).
fn z_of(confidence: f64) -> f64 {
    CONFIDENCE_LEVELS.iter().find(|(c, _)| (c - confidence).abs() < 1e-12).map(|&(_, z)| z).unwrap_or_else(|| {
        panic!("no z for a {confidence} confidence interval: the levels known are {CONFIDENCE_LEVELS:?}")
    })
}

/// Wilson score interval of a proportion `k` of `n` at `confidence`.
pub fn wilson(k: u64, n: u64, confidence: f64) -> [f64; 2] {
    if n == 0 {
        return [0.0, 1.0];
    }
    let (k, n, z) = (k as f64, n as f64, z_of(confidence));
    let p = k / n;
    let d = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / d;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / d;
    [(centre - half).max(0.0), (centre + half).min(1.0)]
}

/// The RTT check: the median within ±max(relative, absolute) of the asked RTT.
pub fn check_rtt(asked_ns: u64, m: &RttMeasurement, t: &Tolerances) -> Check {
    let asked = asked_ns as f64;
    let tol = (asked * t.rtt_relative).max(t.rtt_absolute_ns as f64);
    let (lo, hi) = (asked - tol, asked + tol);
    let measured = m.median_ns as f64;
    let ok = m.probes_received > 0 && (lo..=hi).contains(&measured);
    let hint = (!ok).then(|| {
        if m.probes_received == 0 {
            "no probe came back: the link drops everything (is the emulator running?)".to_string()
        } else if measured > hi && t.rtt_relative > 0.0 {
            let extra = measured - asked;
            let from_ms = (extra / t.rtt_relative / 1e6).ceil().min(MAX_RTT_NS as f64 / 1e6) as u64;
            format!(
                "the path adds {:.3} ms beyond the asked delay here; RTTs from {} on verify (±{:.0} % covers it), \
                 or measure on a quieter machine",
                extra / 1e6,
                units::format_duration(from_ms.max(1) * 1_000_000),
                t.rtt_relative * 100.0
            )
        } else if measured > hi {
            format!("the path adds {:.3} ms beyond the asked delay here", (measured - asked) / 1e6)
        } else {
            "the link is faster than asked: is another delay backend (or none) in use?".to_string()
        }
    });
    Check {
        what: "rtt".into(),
        asked,
        measured,
        accepted_low: lo,
        accepted_high: hi,
        rule: format!("median within ±{} % or ±{} ms", t.rtt_relative * 100.0, t.rtt_absolute_ns as f64 / 1e6),
        ok,
        hint,
    }
}

/// A round rate a little below `bps`: two significant digits, rounded down.
fn round_down_rate(bps: f64) -> u64 {
    if bps < 1.0 {
        return 0;
    }
    let magnitude = 10f64.powi(bps.log10().floor() as i32 - 1);
    ((bps / magnitude).floor() * magnitude) as u64
}

/// The rate check: the wire rate within ±relative of the asked rate.
pub fn check_rate(asked_bps: u64, m: &RateMeasurement, t: &Tolerances) -> Check {
    let asked = asked_bps as f64;
    let (lo, hi) = (asked * (1.0 - t.rate_relative), asked * (1.0 + t.rate_relative));
    let ok = (lo..=hi).contains(&m.wire_bits_per_s);
    let hint = (!ok).then(|| {
        if m.wire_bits_per_s < lo {
            let works = round_down_rate(m.wire_bits_per_s * 0.9);
            format!(
                "this machine delivered {:.1} Mbit/s; rates up to about {} may verify here (if the delay emulator \
                 keeps up too: see its check)",
                m.wire_bits_per_s / 1e6,
                units::format_bits(works.max(1000))
            )
        } else {
            "the link is faster than asked: is the rate limiter in place?".to_string()
        }
    });
    Check {
        what: "rate".into(),
        asked,
        measured: m.wire_bits_per_s,
        accepted_low: lo,
        accepted_high: hi,
        rule: format!("±{} %", t.rate_relative * 100.0),
        ok,
        hint,
    }
}

/// The loss check of one direction: the asked loss inside the measured loss's interval.
pub fn check_loss(what: &str, asked: f64, d: &LossDirection, t: &Tolerances) -> Check {
    let [lo, hi] = d.interval;
    let ok = d.sent > 0 && asked >= lo && asked <= hi;
    let hint = (!ok).then(|| {
        format!(
            "a correct link falls outside its {:.0} % interval {:.0} % of the time: verify again; if it fails \
             again, the emulator or the rate limiter drops packets too (see their counters)",
            t.loss_confidence * 100.0,
            (1.0 - t.loss_confidence) * 100.0
        )
    });
    Check {
        what: what.into(),
        asked,
        measured: d.fraction,
        accepted_low: lo,
        accepted_high: hi,
        rule: format!("asked inside the measured {:.0} % interval", t.loss_confidence * 100.0),
        ok,
        hint,
    }
}

/// The delay under load: the emulator's median lateness (over the whole verification, bulk
/// transfer included) within the lateness budget, half the RTT tolerance (a round trip of two
/// late packets stays within it). A machine too slow for the rate falls behind on most
/// packets and fails here, even when the idle RTT probes were on time: that will not pass.
///
/// The tail is not judged here. On a virtual machine the host takes a vCPU away for
/// milliseconds at moments nothing in the guest controls (docs/bench/stalls/), so a p99 over
/// a few seconds says only whether such a moment fell into them, not what the minutes after
/// will hold. Each measurement screens its own transactions instead and measures again those
/// whose packets were late beyond the budget ([`pqtls_core::link::StallScreen`]).
pub fn check_lateness(asked_rtt_ns: u64, e: &EmulatorReport, t: &Tolerances) -> Check {
    let budget = pqtls_core::link::lateness_budget_ns(asked_rtt_ns, t) as f64;
    let measured = e.lateness.p50_ns as f64;
    let ok = measured <= budget;
    let hint = (!ok).then(|| {
        format!(
            "the delay emulator fell behind on most packets ({} packets, p99 {:.3} ms late): this machine cannot \
             keep up with this rate; lower the rate (the rate check says what it delivered)",
            e.packets,
            e.lateness.p99_ns as f64 / 1e6
        )
    });
    Check {
        what: "delay lateness p50".into(),
        asked: 0.0,
        measured,
        accepted_low: 0.0,
        accepted_high: budget,
        rule: "p50 within half the RTT tolerance; stalls in the tail are screened per transaction".into(),
        ok,
        hint,
    }
}

/// All checks of a measured link.
pub fn checks(
    asked: &LinkSpec,
    rtt: &RttMeasurement,
    rate: Option<&RateMeasurement>,
    loss: &LossMeasurement,
    emulator: &EmulatorReport,
    t: &Tolerances,
) -> Vec<Check> {
    let mut v = Vec::new();
    if let Some(r) = asked.rtt_ns.filter(|&r| r > 0) {
        v.push(check_rtt(r, rtt, t));
        if emulator.kind == "nfqueue" {
            v.push(check_lateness(r, emulator, t));
        }
    }
    if let (Some(bps), Some(m)) = (asked.bits_per_s, rate) {
        v.push(check_rate(bps, m, t));
    }
    v.push(check_loss("loss client→server", asked.loss, &loss.client_to_server, t));
    v.push(check_loss("loss server→client", asked.loss, &loss.server_to_client, t));
    v
}

pub(crate) fn mono_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

fn io(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(what, e)
}

fn interrupted(flag: &AtomicBool) -> Result<()> {
    if flag.load(Ordering::SeqCst) {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

/// Sleeps `d` in short steps, returning early (with an error) when interrupted.
pub fn sleep_watching(d: Duration, flag: &AtomicBool) -> Result<()> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        interrupted(flag)?;
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(20)));
    }
    interrupted(flag)
}

fn udp_in(lab: &Lab, side: Side, port: u16) -> Result<UdpSocket> {
    let s = lab.run_in(side, move || UdpSocket::bind(("0.0.0.0", port)))?.map_err(io("UDP bind in the lab"))?;
    s.set_read_timeout(Some(Duration::from_millis(20))).map_err(io("UDP timeout"))?;
    Ok(s)
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// RTT by UDP ping-pong: the client sends `probes` datagrams `interval` apart, each carrying
/// its send time; the server echoes them.
fn measure_rtt(lab: &Lab, o: &VerifyOptions, interrupt: &AtomicBool) -> Result<RttMeasurement> {
    let server = udp_in(lab, Side::Server, ECHO_PORT)?;
    let client = udp_in(lab, Side::Client, 0)?;
    let to = SocketAddr::from((lab.server_addr(), ECHO_PORT));
    client.connect(to).map_err(io("UDP connect"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while !st.load(Ordering::Relaxed) {
            if let Ok((n, from)) = server.recv_from(&mut buf) {
                let _ = server.send_to(&buf[..n], from);
            }
        }
    });
    let result = (|| {
        let asked = lab.spec().rtt_ns.unwrap_or(0);
        let wait = Duration::from_nanos(asked * 3) + Duration::from_millis(300);
        let recv = client.try_clone().map_err(io("UDP clone"))?;
        let probe = |seq: u64| -> Result<()> {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&seq.to_le_bytes());
            b[8..].copy_from_slice(&mono_ns().to_le_bytes());
            client.send(&b).map(|_| ()).map_err(io("UDP send"))
        };
        // Warm-up: neighbour discovery and the first packets' costs stay out of the sample.
        for i in 0..5 {
            probe(u64::MAX - i)?;
        }
        let mut buf = [0u8; 64];
        let warm_end = Instant::now() + wait;
        while Instant::now() < warm_end {
            interrupted(interrupt)?;
            if recv.recv(&mut buf).is_ok() {
                break;
            }
        }
        let n = u64::from(o.rtt_probes);
        let collector = std::thread::spawn(move || {
            let mut rtts = Vec::with_capacity(n as usize);
            let (mut highest, mut reordered) = (None::<u64>, 0u64);
            let mut last = Instant::now();
            let mut buf = [0u8; 64];
            while rtts.len() < n as usize && last.elapsed() < wait {
                if let Ok(16) = recv.recv(&mut buf) {
                    let seq = u64::from_le_bytes(buf[..8].try_into().unwrap_or_default());
                    let sent = u64::from_le_bytes(buf[8..16].try_into().unwrap_or_default());
                    if seq < n {
                        rtts.push(mono_ns().saturating_sub(sent));
                        last = Instant::now();
                        if highest.is_some_and(|h| seq < h) {
                            reordered += 1;
                        }
                        highest = highest.max(Some(seq));
                    }
                }
            }
            (rtts, reordered)
        });
        let start = Instant::now();
        for seq in 0..n {
            let due = start + o.probe_interval * seq as u32;
            if let Some(d) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            interrupted(interrupt)?;
            probe(seq)?;
        }
        let (mut rtts, reordered) =
            collector.join().map_err(|_| Error::Invalid("the RTT probe collector panicked".into()))?;
        rtts.sort_unstable();
        let mean = if rtts.is_empty() { 0.0 } else { rtts.iter().sum::<u64>() as f64 / rtts.len() as f64 };
        let var = if rtts.len() < 2 {
            0.0
        } else {
            rtts.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (rtts.len() - 1) as f64
        };
        Ok(RttMeasurement {
            probes_sent: n,
            probes_received: rtts.len() as u64,
            median_ns: quantile(&rtts, 0.5),
            p5_ns: quantile(&rtts, 0.05),
            p95_ns: quantile(&rtts, 0.95),
            min_ns: rtts.first().copied().unwrap_or(0),
            max_ns: rtts.last().copied().unwrap_or(0),
            mean_ns: mean,
            stdev_ns: var.sqrt(),
            reordered,
            concurrent_flow_bits_per_s: None,
        })
    })();
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    result
}

/// A bulk TCP flow server → client paced in user space at `bits_per_s` (1 ms ticks), exempt
/// from the loss rule, until `stop`; the client counts what it receives into `received`.
fn paced_flow(
    lab: &Lab,
    bits_per_s: u64,
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
) -> Result<std::thread::JoinHandle<()>> {
    let listener = lab
        .run_in(Side::Server, || TcpListener::bind(("0.0.0.0", FLOW_PORT)))?
        .map_err(io("TCP listen in the server namespace"))?;
    let to = SocketAddr::from((lab.server_addr(), FLOW_PORT));
    let mut client = lab
        .run_in(Side::Client, move || TcpStream::connect_timeout(&to, Duration::from_secs(5)))?
        .map_err(io("TCP connect across the lab"))?;
    let (mut conn, _) = listener.accept().map_err(io("TCP accept"))?;
    let st = stop.clone();
    std::thread::spawn(move || {
        let per_ms = (bits_per_s / 8 / 1000).max(1) as usize;
        let chunk = vec![0x5au8; per_ms];
        let _ = conn.set_nonblocking(true);
        let start = Instant::now();
        let mut ticks = 0u64;
        while !st.load(Ordering::Relaxed) {
            ticks += 1;
            let due = start + Duration::from_millis(ticks);
            if let Some(d) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            // At most the tick's share: what the socket cannot take now (a full send buffer in
            // slow start) is skipped, not queued — the flow is paced, never above the rate.
            match conn.write(&chunk) {
                Ok(_) => {}
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
        abort(&conn);
    });
    Ok(std::thread::spawn(move || {
        let _ = client.set_read_timeout(Some(Duration::from_millis(50)));
        let mut buf = vec![0u8; 256 << 10];
        while !stop.load(Ordering::Relaxed) {
            match client.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    received.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
        abort(&client);
    }))
}

/// Counters of the router's rate limiter on `dev` (its `tc -s` statistics).
#[derive(Clone, Copy, Debug, Default)]
struct TbfCounters {
    bytes: u64,
    drops: u64,
    backlog_bytes: u64,
}

fn tbf_counters(lab: &Lab, dev: &str) -> Result<Option<TbfCounters>> {
    let out = cmd::tc(&lab.ns(Side::Router), &["-s", "-j", "qdisc", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(&out)
        .map_err(|e| Error::Invalid(format!("cannot read `tc -s -j qdisc show` output ({e}): {out}")))?;
    Ok(v.as_array().and_then(|a| a.iter().find(|q| q["kind"] == "tbf")).map(|q| TbfCounters {
        bytes: q["bytes"].as_u64().unwrap_or(0),
        drops: q["drops"].as_u64().unwrap_or(0),
        backlog_bytes: q["backlog"].as_u64().unwrap_or(0),
    }))
}

fn tbf_bytes_to_client(lab: &Lab) -> Result<u64> {
    tbf_counters(lab, ROUTER_CLIENT_IF)?
        .map(|c| c.bytes)
        .ok_or_else(|| Error::Invalid(format!("no rate limiter on the router's {ROUTER_CLIENT_IF}")))
}

/// Drops of both rate limiters so far.
fn tbf_drops(lab: &Lab) -> Result<u64> {
    let mut d = 0;
    for dev in [ROUTER_CLIENT_IF, ROUTER_SERVER_IF] {
        d += tbf_counters(lab, dev)?.map_or(0, |c| c.drops);
    }
    Ok(d)
}

/// Waits until the rate limiters' queues are empty and one more RTT has passed (what a bulk
/// flow left in flight is delivered or dropped), at most 10 s.
fn wait_drained(lab: &Lab, interrupt: &AtomicBool) -> Result<()> {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let mut backlog = 0;
        for dev in [ROUTER_CLIENT_IF, ROUTER_SERVER_IF] {
            backlog += tbf_counters(lab, dev)?.map_or(0, |c| c.backlog_bytes);
        }
        if backlog == 0 || Instant::now() > end {
            break;
        }
        sleep_watching(Duration::from_millis(20), interrupt)?;
    }
    sleep_watching(Duration::from_nanos(lab.spec().rtt_ns.unwrap_or(0)) + Duration::from_millis(50), interrupt)
}

/// Closes with a reset: what the socket still holds is discarded, not sent.
fn abort(s: &TcpStream) {
    let _ =
        nix::sys::socket::setsockopt(s, nix::sys::socket::sockopt::Linger, &libc::linger { l_onoff: 1, l_linger: 0 });
}

fn congestion_control_of(s: &TcpStream) -> String {
    nix::sys::socket::getsockopt(s, nix::sys::socket::sockopt::TcpCongestion)
        .map(|c| c.to_string_lossy().trim_end_matches('\0').to_string())
        .unwrap_or_else(|e| format!("unknown ({e})"))
}

/// Rate by a bulk TCP transfer server → client, measured over a window after warm-up. The
/// flow is exempt from the loss rule while it runs: the rate is the link's capacity, not what
/// a congestion control makes of a lossy link (that is what experiments measure).
fn measure_rate(lab: &Lab, o: &VerifyOptions, interrupt: &AtomicBool) -> Result<RateMeasurement> {
    let listener = lab
        .run_in(Side::Server, || TcpListener::bind(("0.0.0.0", RATE_PORT)))?
        .map_err(io("TCP listen in the server namespace"))?;
    lab.exempt_port(RATE_PORT, true)?;
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let result = (|| {
        let to = SocketAddr::from((lab.server_addr(), RATE_PORT));
        let client = lab
            .run_in(Side::Client, move || TcpStream::connect_timeout(&to, Duration::from_secs(5)))?
            .map_err(io("TCP connect across the lab"))?;
        let (mut conn, _) = listener.accept().map_err(io("TCP accept"))?;
        let congestion_control = congestion_control_of(&conn);
        let st = stop.clone();
        let sender = std::thread::spawn(move || {
            let chunk = vec![0x5au8; 64 << 10];
            let _ = conn.set_write_timeout(Some(Duration::from_millis(50)));
            while !st.load(Ordering::Relaxed) {
                match conn.write(&chunk) {
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                    Err(_) => break,
                }
            }
            abort(&conn);
        });
        let (st, rx) = (stop.clone(), received.clone());
        let mut client = client;
        let reader = std::thread::spawn(move || {
            let _ = client.set_read_timeout(Some(Duration::from_millis(50)));
            let mut buf = vec![0u8; 256 << 10];
            while !st.load(Ordering::Relaxed) {
                match client.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        rx.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                    Err(_) => break,
                }
            }
            abort(&client);
        });
        let rtt = Duration::from_nanos(lab.spec().rtt_ns.unwrap_or(0));
        let measured = (|| {
            sleep_watching(o.rate_warmup + rtt * 10, interrupt)?;
            let (b0, g0, t0) = (tbf_bytes_to_client(lab)?, received.load(Ordering::Relaxed), mono_ns());
            sleep_watching(o.rate_window, interrupt)?;
            let (b1, g1, t1) = (tbf_bytes_to_client(lab)?, received.load(Ordering::Relaxed), mono_ns());
            let secs = (t1 - t0) as f64 / 1e9;
            Ok(RateMeasurement {
                wire_bits_per_s: (b1 - b0) as f64 * 8.0 / secs,
                goodput_bits_per_s: (g1 - g0) as f64 * 8.0 / secs,
                window_ns: t1 - t0,
                congestion_control: congestion_control.clone(),
            })
        })();
        stop.store(true, Ordering::Relaxed);
        let _ = sender.join();
        let _ = reader.join();
        measured
    })();
    stop.store(true, Ordering::Relaxed);
    let removed = lab.exempt_port(RATE_PORT, false);
    let m = result?;
    removed?;
    Ok(m)
}

/// Datagrams per direction for the loss measurement: enough for ~100 expected losses, at
/// least 2000, within the options' limits at a pace that takes a fifth of the link's rate.
fn loss_plan(asked: &LinkSpec, o: &VerifyOptions) -> (u64, Duration) {
    // 60-byte frames (the Ethernet minimum: 16 bytes of payload fit).
    let pps_cap = asked.bits_per_s.map_or(10_000.0, |b| (b as f64 * 0.2 / (60.0 * 8.0)).min(10_000.0));
    let wanted = if asked.loss > 0.0 { (100.0 / asked.loss).ceil() as u64 } else { 2000 };
    let most = ((pps_cap * o.loss_max_time.as_secs_f64()) as u64).min(o.loss_max_datagrams);
    let n = wanted.max(2000).min(most).max(100);
    (n, Duration::from_secs_f64(1.0 / pps_cap))
}

/// Loss by one-way datagrams in both directions at once, each counted by its receiver.
fn measure_loss(lab: &Lab, o: &VerifyOptions, interrupt: &AtomicBool) -> Result<LossMeasurement> {
    let (n, gap) = loss_plan(lab.spec(), o);
    let server = udp_in(lab, Side::Server, LOSS_PORT)?;
    let client = udp_in(lab, Side::Client, LOSS_PORT)?;
    let stop = Arc::new(AtomicBool::new(false));
    let counter = |sock: UdpSocket| {
        let st = stop.clone();
        std::thread::spawn(move || {
            let mut seen = vec![false; n as usize];
            let mut buf = [0u8; 64];
            while !st.load(Ordering::Relaxed) {
                if let Ok(16) = sock.recv(&mut buf) {
                    let seq = u64::from_le_bytes(buf[..8].try_into().unwrap_or_default());
                    if let Some(s) = seen.get_mut(seq as usize) {
                        *s = true;
                    }
                }
            }
            seen.iter().filter(|&&s| s).count() as u64
        })
    };
    let (server_tx, client_tx) =
        (server.try_clone().map_err(io("UDP clone"))?, client.try_clone().map_err(io("UDP clone"))?);
    let at_server = counter(server);
    let at_client = counter(client);
    let drops_before = tbf_drops(lab)?;
    let result = (|| {
        let (to_server, to_client) =
            (SocketAddr::from((lab.server_addr(), LOSS_PORT)), SocketAddr::from((lab.client_addr(), LOSS_PORT)));
        let start = Instant::now();
        let mut sent = 0u64;
        while sent < n {
            interrupted(interrupt)?;
            // Everything due by now, then a short sleep: ~1 ms bursts at the planned pace.
            let due = ((start.elapsed().as_secs_f64() / gap.as_secs_f64()) as u64 + 1).min(n);
            while sent < due {
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&sent.to_le_bytes());
                client_tx.send_to(&b, to_server).map_err(io("UDP send"))?;
                server_tx.send_to(&b, to_client).map_err(io("UDP send"))?;
                sent += 1;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        sleep_watching(Duration::from_nanos(lab.spec().rtt_ns.unwrap_or(0)) + Duration::from_millis(300), interrupt)
    })();
    stop.store(true, Ordering::Relaxed);
    let received_server = at_server.join().map_err(|_| Error::Invalid("loss counter panicked".into()))?;
    let received_client = at_client.join().map_err(|_| Error::Invalid("loss counter panicked".into()))?;
    result?;
    let rate_limiter_drops = tbf_drops(lab)? - drops_before;
    let c = o.tolerances.loss_confidence;
    let dir = |received: u64| LossDirection {
        sent: n,
        received,
        fraction: (n - received) as f64 / n as f64,
        interval: wilson(n - received, n, c),
    };
    Ok(LossMeasurement {
        client_to_server: dir(received_server),
        server_to_client: dir(received_client),
        rate_limiter_drops,
    })
}

impl Lab {
    /// Measures the link and compares it with what was asked. `interrupt` (e.g. set by
    /// Ctrl-C) stops it with [`Error::Interrupted`]. A refused link is a report with
    /// `accepted == false`, not an error; see [`Lab::verified`].
    pub fn verify(&self, options: &VerifyOptions, interrupt: &AtomicBool) -> Result<LinkReport> {
        let started = mono_ns();
        let cpu_before = cpu_times();
        self.check_emulator()?;
        self.reset_emulator();
        let rtt = match options.concurrent_flow_bits_per_s {
            None => measure_rtt(self, options, interrupt)?,
            Some(bps) => {
                self.exempt_port(FLOW_PORT, true)?;
                let stop = Arc::new(AtomicBool::new(false));
                let received = Arc::new(AtomicU64::new(0));
                let flow = paced_flow(self, bps, stop.clone(), received.clone());
                // Slow start first (10 RTTs and a second), then the probes; the flow's goodput
                // is measured over the probes' window only.
                let warmup = options.rate_warmup + Duration::from_nanos(self.spec().rtt_ns.unwrap_or(0)) * 10;
                let measured = match &flow {
                    Ok(_) => sleep_watching(warmup, interrupt).and_then(|()| {
                        let (b0, t0) = (received.load(Ordering::Relaxed), Instant::now());
                        let m = measure_rtt(self, options, interrupt)?;
                        let secs = t0.elapsed().as_secs_f64();
                        Ok((m, (received.load(Ordering::Relaxed) - b0) as f64 * 8.0 / secs.max(1e-9)))
                    }),
                    Err(_) => Ok((RttMeasurement::default(), 0.0)),
                };
                stop.store(true, Ordering::Relaxed);
                let joined = flow.map(|h| h.join());
                let removed = self.exempt_port(FLOW_PORT, false);
                joined?.map_err(|_| Error::Invalid("the concurrent flow's reader panicked".into()))?;
                let (mut m, goodput) = measured?;
                removed?;
                m.concurrent_flow_bits_per_s = Some(goodput);
                wait_drained(self, interrupt)?;
                m
            }
        };
        let rate = match self.spec().bits_per_s {
            Some(_) => {
                let r = measure_rate(self, options, interrupt)?;
                // The bulk flow's queue must not be counted as loss.
                wait_drained(self, interrupt)?;
                Some(r)
            }
            None => None,
        };
        let loss = measure_loss(self, options, interrupt)?;
        self.check_emulator()?;
        let emulator = self.emulator_report();
        let checks = checks(self.spec(), &rtt, rate.as_ref(), &loss, &emulator, &options.tolerances);
        Ok(LinkReport {
            asked: self.spec().clone(),
            setup: self.setup().clone(),
            tolerances: options.tolerances.clone(),
            accepted: checks.iter().all(|c| c.ok),
            rtt,
            rate,
            loss,
            emulator,
            checks,
            duration_ns: mono_ns() - started,
            cpu_steal: cpu_before.zip(cpu_times()).and_then(|(a, b)| b.steal_since(&a)),
            earlier_refusals: Vec::new(),
        })
    }

    /// [`Lab::verify`], with a refused link as [`Error::Refused`] (carrying the report).
    pub fn verified(&self, options: &VerifyOptions, interrupt: &AtomicBool) -> Result<LinkReport> {
        let report = self.verify(options, interrupt)?;
        if report.accepted {
            Ok(report)
        } else {
            Err(Error::Refused(Box::new(report)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_its_share_of_the_cpu_time_between_two_readings() {
        let a = CpuTimes::parse("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n").unwrap();
        assert_eq!(a, CpuTimes { total: 1000, steal: 35 });
        let b = CpuTimes { total: 1200, steal: 45 };
        assert_eq!(b.steal_since(&a), Some(0.05));
        assert_eq!(a.steal_since(&a), None, "no time passed");
        assert_eq!(CpuTimes::parse("cpu 1 2 3\n"), None, "a kernel without steal");
        // This machine's own.
        assert!(cpu_times().is_some());
    }

    fn rtt(median_ms: f64) -> RttMeasurement {
        RttMeasurement {
            probes_sent: 200,
            probes_received: 200,
            median_ns: (median_ms * 1e6) as u64,
            ..Default::default()
        }
    }

    #[test]
    fn rtt_tolerance_is_two_percent_or_a_third_of_a_millisecond() {
        let t = Tolerances::default();
        // 20 ms: ±0.4 ms (2 % is above 0.3 ms).
        assert!(check_rtt(20_000_000, &rtt(20.39), &t).ok);
        assert!(check_rtt(20_000_000, &rtt(19.61), &t).ok);
        assert!(!check_rtt(20_000_000, &rtt(20.41), &t).ok);
        // 10 ms: ±0.3 ms (2 % would be 0.2 ms).
        assert!(check_rtt(10_000_000, &rtt(10.29), &t).ok);
        assert!(!check_rtt(10_000_000, &rtt(10.31), &t).ok);
        // 150 ms: ±3 ms.
        assert!(check_rtt(150_000_000, &rtt(152.9), &t).ok);
        let c = check_rtt(150_000_000, &rtt(154.0), &t);
        assert!(!c.ok);
        assert!(c.hint.unwrap().contains("RTTs from 200ms on verify"));
        // Nothing came back: refused, saying so.
        let none = RttMeasurement { probes_sent: 200, ..Default::default() };
        assert!(check_rtt(10_000_000, &none, &t).hint.unwrap().contains("no probe"));
    }

    #[test]
    fn rate_tolerance_is_three_percent_and_a_slow_machine_says_what_works() {
        let t = Tolerances::default();
        let m = |mbit: f64| RateMeasurement { wire_bits_per_s: mbit * 1e6, ..Default::default() };
        assert!(check_rate(100_000_000, &m(97.1), &t).ok);
        assert!(check_rate(100_000_000, &m(102.9), &t).ok);
        assert!(!check_rate(100_000_000, &m(96.9), &t).ok);
        let c = check_rate(1_000_000_000, &m(430.0), &t);
        assert!(!c.ok);
        let hint = c.hint.unwrap();
        assert!(hint.contains("430.0 Mbit/s") && hint.contains("up to about 380mbit"), "{hint}");
    }

    #[test]
    fn loss_is_accepted_inside_its_wilson_interval() {
        let t = Tolerances::default();
        // Known values: 10 of 100 at 95 %: 0.0552 … 0.1744.
        let [lo, hi] = wilson(10, 100, 0.95);
        assert!((lo - 0.0552).abs() < 5e-4 && (hi - 0.1744).abs() < 5e-4, "{lo} {hi}");
        let d = |sent: u64, lost: u64| LossDirection {
            sent,
            received: sent - lost,
            fraction: lost as f64 / sent as f64,
            interval: wilson(lost, sent, 0.95),
        };
        assert!(check_loss("loss", 0.10, &d(2000, 200), &t).ok);
        assert!(check_loss("loss", 0.10, &d(2000, 180), &t).ok);
        assert!(!check_loss("loss", 0.10, &d(2000, 150), &t).ok);
        // No loss asked: any loss measured refuses the link; none accepts it.
        assert!(check_loss("loss", 0.0, &d(2000, 0), &t).ok);
        assert!(!check_loss("loss", 0.0, &d(2000, 3), &t).ok);
        // Nothing sent: refused.
        assert!(!check_loss("loss", 0.0, &LossDirection::default(), &t).ok);
    }

    #[test]
    fn the_verdict_needs_every_check() {
        let t = Tolerances::default();
        let asked = LinkSpec {
            rtt_ns: Some(20_000_000),
            bits_per_s: Some(10_000_000),
            loss: 0.0,
            jitter_ns: 0,
            initcwnd: None,
        };
        let good = LossDirection { sent: 2000, received: 2000, fraction: 0.0, interval: wilson(0, 2000, 0.95) };
        let loss = LossMeasurement { client_to_server: good.clone(), server_to_client: good, rate_limiter_drops: 0 };
        let rate = RateMeasurement { wire_bits_per_s: 9.9e6, ..Default::default() };
        let mut emulator = EmulatorReport { kind: "nfqueue".into(), ..EmulatorReport::none() };
        emulator.lateness.p99_ns = 100_000;
        let all = checks(&asked, &rtt(20.1), Some(&rate), &loss, &emulator, &t);
        assert_eq!(all.len(), 5);
        assert!(all.iter().all(|c| c.ok));
        let slow = RateMeasurement { wire_bits_per_s: 5e6, ..Default::default() };
        let all = checks(&asked, &rtt(20.1), Some(&slow), &loss, &emulator, &t);
        assert_eq!(all.iter().filter(|c| !c.ok).map(|c| c.what.as_str()).collect::<Vec<_>>(), ["rate"]);
        // Host stalls in the tail do not refuse the link (each measurement screens its own
        // transactions)…
        emulator.lateness.p99_ns = 12_000_000;
        emulator.lateness.max_ns = 15_000_000;
        assert!(checks(&asked, &rtt(20.1), Some(&rate), &loss, &emulator, &t).iter().all(|c| c.ok));
        // …an emulator that fell behind on most packets under the bulk flow does: at 20 ms the
        // budget is half of ±0.4 ms.
        emulator.lateness.p50_ns = 201_000;
        let all = checks(&asked, &rtt(20.1), Some(&rate), &loss, &emulator, &t);
        let late: Vec<&Check> = all.iter().filter(|c| !c.ok).collect();
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].what, "delay lateness p50");
        assert!(late[0].hint.as_ref().unwrap().contains("cannot keep up"));
    }

    #[test]
    fn the_loss_plan_fits_the_link() {
        let o = VerifyOptions::default();
        let spec = |loss: f64, mbit: Option<u64>| LinkSpec {
            rtt_ns: Some(20_000_000),
            bits_per_s: mbit.map(|m| m * 1_000_000),
            loss,
            jitter_ns: 0,
            initcwnd: None,
        };
        assert_eq!(loss_plan(&spec(0.10, Some(100)), &o).0, 2000);
        assert_eq!(loss_plan(&spec(0.005, Some(100)), &o).0, 20_000);
        // A slow link: a fifth of 1 Mbit/s in 60-byte frames for at most 5 s.
        let (n, gap) = loss_plan(&spec(0.005, Some(1)), &o);
        assert_eq!(n, 2083);
        assert!(gap > Duration::from_micros(2000));
    }
}
