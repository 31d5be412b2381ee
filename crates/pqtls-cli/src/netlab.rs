//! `pqtls netlab verify|clean`: build an emulated link in network namespaces, measure it
//! against what was asked and tear it down; remove what killed runs left behind.

use crate::context::Ending;
use crate::table;
use anyhow::{Context, Result};
use pqtls_core::scenario::NetworkSpec;
use pqtls_core::units;
use pqtls_netlab::{verify, Lab, LabOptions, LinkReport, VerifyOptions};

#[derive(clap::Args)]
pub struct NetlabArgs {
    #[command(subcommand)]
    pub command: NetlabCommand,
}

#[derive(clap::Subcommand)]
pub enum NetlabCommand {
    /// Build a link (client, router and server namespaces), measure its RTT, rate and loss,
    /// print asked vs measured with verdicts, tear it down. Exits with 5 when the link is refused.
    Verify(VerifyArgs),
    /// Remove what killed runs left behind: lab namespaces whose creating process is dead,
    /// with their links, qdiscs, iptables rules and emulator. Running labs are left alone.
    Clean,
}

#[derive(clap::Args)]
pub struct VerifyArgs {
    /// Round-trip time, e.g. 50ms (half of it each way).
    #[arg(long, allow_hyphen_values = true)]
    pub rtt: Option<String>,
    /// Rate of the link in each direction, e.g. 100mbit.
    #[arg(long, allow_hyphen_values = true)]
    pub bandwidth: Option<String>,
    /// Packet loss in each direction, e.g. 0.5%.
    #[arg(long, default_value = "0%", allow_hyphen_values = true)]
    pub loss: String,
    /// Jitter of the one-way delay (uniform within ±jitter; packets keep their order), e.g. 1ms.
    #[arg(long, default_value = "0ms", allow_hyphen_values = true)]
    pub jitter: String,
    /// Initial congestion and receive window (segments) of client and server, e.g. 10.
    #[arg(long, allow_hyphen_values = true)]
    pub initcwnd: Option<String>,
    /// TCP congestion control of every connection in the lab.
    #[arg(long, default_value = "cubic")]
    pub congestion_control: String,
    /// RTT probes (10 to 100 000).
    #[arg(long, default_value_t = 200, allow_negative_numbers = true, value_parser = crate::flags::count_u32(10, 100_000, "200"))]
    pub probes: u32,
    /// While the RTT is probed, run a bulk TCP flow server → client paced at this rate
    /// (e.g. 100mbit): the delay emulator's accuracy under load.
    #[arg(long, allow_hyphen_values = true)]
    pub flow: Option<String>,
    /// Write the link report as JSON to FILE (`-`: standard output); the table is on stderr.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
}

fn network(a: &VerifyArgs) -> Result<NetworkSpec> {
    Ok(NetworkSpec {
        rtt_ns: a.rtt.as_deref().map(units::duration_ns).transpose().context("--rtt")?,
        bits_per_s: a.bandwidth.as_deref().map(units::bits_per_s).transpose().context("--bandwidth")?,
        loss: units::percent(&a.loss).context("--loss")?,
        jitter_ns: units::duration_ns(&a.jitter).context("--jitter")?,
        initcwnd: a.initcwnd.as_deref().map(|s| units::count(s, "initcwnd", 1000)).transpose().context("--initcwnd")?,
        client_initcwnd: None,
        server_initcwnd: None,
    })
}

pub fn run(args: NetlabArgs) -> Result<Ending> {
    match args.command {
        NetlabCommand::Verify(a) => verify_link(a),
        NetlabCommand::Clean => {
            let removed = pqtls_netlab::clean()?;
            if removed.is_empty() {
                crate::progress::line("nothing to clean: no lab namespace of a dead run");
            }
            let text: String = removed.iter().map(|n| format!("removed {n}\n")).collect();
            crate::output::print(&text)?;
            Ok(Ending::Complete)
        }
    }
}

fn verify_link(a: VerifyArgs) -> Result<Ending> {
    let net = network(&a)?;
    if let Some(f) = a.flow.as_deref() {
        units::bits_per_s(f).context("--flow")?;
    }
    let json = crate::output::create(a.json.as_deref())?;
    let interrupt = crate::context::interrupt_flag();
    let options = LabOptions { congestion_control: a.congestion_control.clone(), ..LabOptions::default() };
    let lab = Lab::up(&net, &options)?;
    crate::progress::line(&format!(
        "lab {} up: {}; measuring…",
        lab.ns(pqtls_netlab::Side::Router).trim_end_matches("-r"),
        lab.spec()
    ));
    let verify_options = VerifyOptions {
        rtt_probes: a.probes,
        concurrent_flow_bits_per_s: a.flow.as_deref().map(units::bits_per_s).transpose().context("--flow")?,
        ..VerifyOptions::default()
    };
    let report = match lab.verify(&verify_options, &interrupt) {
        Err(pqtls_netlab::Error::Interrupted) => return Ok(Ending::Interrupted),
        r => r?,
    };
    lab.down()?;
    crate::progress::line(&render(&report));
    if let Some(out) = json {
        crate::output::write(out, format!("{}\n", serde_json::to_string_pretty(&report)?).as_bytes())?;
    }
    if report.accepted {
        Ok(Ending::Complete)
    } else {
        Err(crate::context::Exit {
            code: crate::context::EXIT_REFUSED,
            message: format!("the link was refused: {}", report.refusal()),
        }
        .into())
    }
}

/// Asked vs measured, with verdicts, then how the link was made.
pub fn render(r: &LinkReport) -> String {
    let mut t = table::new(&["", "asked", "measured", "accepted", "verdict"]);
    for c in &r.checks {
        let accepted = if c.what.starts_with("loss") {
            format!("interval {}…{}", verify::show(&c.what, c.accepted_low), verify::show(&c.what, c.accepted_high))
        } else {
            format!("{}…{}", verify::show(&c.what, c.accepted_low), verify::show(&c.what, c.accepted_high))
        };
        t.add_row(vec![
            c.what.clone(),
            verify::show(&c.what, c.asked),
            verify::show(&c.what, c.measured),
            accepted,
            if c.ok { "ok".into() } else { "REFUSED".into() },
        ]);
    }
    let mut s = format!("{t}\n");
    let ms = |ns: f64| format!("{:.3}", ns / 1e6);
    s += &format!(
        "RTT: {} probes back of {} ({} reordered); median {} ms, p5 {} p95 {} min {} max {} ms\n",
        r.rtt.probes_received,
        r.rtt.probes_sent,
        r.rtt.reordered,
        ms(r.rtt.median_ns as f64),
        ms(r.rtt.p5_ns as f64),
        ms(r.rtt.p95_ns as f64),
        ms(r.rtt.min_ns as f64),
        ms(r.rtt.max_ns as f64)
    );
    if let Some(f) = r.rtt.concurrent_flow_bits_per_s {
        s += &format!("(probed while a bulk flow ran server → client at {:.1} Mbit/s goodput)\n", f / 1e6);
    }
    if let Some(rate) = &r.rate {
        s += &format!(
            "rate: {:.2} Mbit/s on the wire (frames), {:.2} Mbit/s TCP goodput, {} congestion control\n",
            rate.wire_bits_per_s / 1e6,
            rate.goodput_bits_per_s / 1e6,
            rate.congestion_control
        );
    }
    for (dir, d) in [("client→server", &r.loss.client_to_server), ("server→client", &r.loss.server_to_client)] {
        s += &format!("loss {dir}: {} of {} datagrams lost\n", d.sent - d.received, d.sent);
    }
    if r.loss.rate_limiter_drops > 0 {
        s += &format!("(the rate limiters dropped {} packets meanwhile)\n", r.loss.rate_limiter_drops);
    }
    let e = &r.emulator;
    s += &format!("delay: {}", r.setup.delay_backend);
    if e.kind == "nfqueue" {
        s += &format!(
            "; {} packets, lateness p50 {} p99 {} max {} µs; {}, CPU {}, timer slack {} ns; {} kernel-stamped; queue drops {}",
            e.packets,
            e.lateness.p50_ns / 1000,
            e.lateness.p99_ns / 1000,
            e.lateness.max_ns / 1000,
            e.scheduling,
            e.cpu.map_or("any".into(), |c| c.to_string()),
            e.timer_slack_ns.map_or("?".into(), |n| n.to_string()),
            e.kernel_stamped,
            e.queue_dropped.map_or("?".into(), |n| n.to_string())
        );
        if let Some(u) = e.cpu_use() {
            s += &format!("; emulator thread CPU {:.1} % of wall time", u * 100.0);
        }
        let budget = r.asked.rtt_ns.map(|rtt| pqtls_core::link::lateness_budget_ns(rtt, &r.tolerances)).unwrap_or(0);
        if budget > 0 && e.lateness.max_ns > budget {
            s += &format!(
                "\nhost stalls: some packets were released up to {:.2} ms late (p99 {:.2} ms; the budget is {:.2} ms): \
                 moments the machine did not run the emulator; measurements over this link screen their own \
                 transactions and measure again those whose packets were late beyond the budget",
                e.lateness.max_ns as f64 / 1e6,
                e.lateness.p99_ns as f64 / 1e6,
                budget as f64 / 1e6
            );
        }
    }
    s += "\n";
    let st = &r.setup;
    s += &format!(
        "tcp: {} congestion control, initcwnd client {} server {}, tcp_rmem {}, tcp_wmem {}; rate limiter: {}\n",
        st.congestion_control,
        st.client_initcwnd.map_or("default".into(), |n| n.to_string()),
        st.server_initcwnd.map_or("default".into(), |n| n.to_string()),
        st.tcp_rmem,
        st.tcp_wmem,
        match (st.rate_bits_per_s, st.tbf_burst_bytes, st.tbf_limit_bytes) {
            (Some(b), Some(burst), Some(limit)) =>
                format!("tbf {} burst {burst} B limit {limit} B", units::format_bits(b)),
            _ => "none".into(),
        }
    );
    if !r.accepted {
        s += &format!("refused: {}\n", r.refusal());
    }
    s
}
