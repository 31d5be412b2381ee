//! The transfer measurement over QUIC (`transport = quic`, issue 22): `pqtls serve --quic` (h3
//! over quinn, rustls) in the lab's server namespace, the HTTP/3 load generator in its client
//! namespace, over the same verified link as TCP transfers (the delay emulator's NFQUEUE rule,
//! the loss rule and tbf match every IP packet, UDP included; the link's RTT is verified with
//! UDP probes). One new QUIC connection per transfer, `GET /<size>`. The record is a transfer
//! record: TTFB/TTLB, the layers (no `tcp`: first Initial → handshake done → request → first
//! and last byte), the negotiated group, suite and signature checked against the scenario,
//! quinn's datagram counters of the first connection, and the round trips measured next to the
//! QUIC model's ([`QuicFlightModel`]).
//!
//! `initcwnd` over QUIC is the congestion controller's initial window: N × the initial
//! datagram (1,200 bytes), set on quinn (`client_initcwnd` on the client, `server_initcwnd` on
//! the server); without it quinn's default, 12,000 bytes. `quic_initial_mtu` sets quinn's initial
//! MTU on both sides (the client's Initial datagrams, and so the server's 3× budget).
//!
//! `quic_token = true` measures a second contact: the server sends address-validation tokens
//! (NEW_TOKEN), one unmeasured connection before the run receives the first, and every
//! connection of the run (warm-up included, one at a time) offers one its predecessor
//! received — its address valid at once, no 3× limit. The server counts the connections that
//! came with a valid token; one that did not fails the measurement (it would be a first
//! contact recorded as a second).

use crate::carrier::quic::QuicClient;
use crate::carrier::{quic_load, Client};
use crate::links::netlab_error;
use crate::load::{Expect, LoadOptions, Target};
use crate::transfer::{completed, in_client, options, transfer_result, Transfer};
use pqtls_core::catalogue::Stack;
use pqtls_core::load::Terminator;
use pqtls_core::record::{Measured, Outcome, Record};
use pqtls_core::roundtrip_quic::quinn_mtu_probes;
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::transfer::{QuicFlightModel, QuicTransfer, TokenUse};
use pqtls_core::{units, Error, Result};
use pqtls_lab::measurement::Progress;
use pqtls_netlab::Side;
use pqtls_quic::tuning::Tuning;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;

/// HTTP/3 bytes of a request besides its path and authority: the HEADERS frame with its QPACK
/// field lines (method, scheme, static-table hits), and the client's control stream with its
/// SETTINGS (an estimate: the model needs it to a few tens of bytes).
const H3_REQUEST_OVERHEAD_BYTES: u64 = 48;
/// HTTP/3 bytes of a response besides its body: the HEADERS frame (status, content-type,
/// content-length) and the server's control stream with its SETTINGS (an estimate).
const H3_RESPONSE_OVERHEAD_BYTES: u64 = 48;
/// A DATA frame's header: type and length (varints).
const H3_DATA_FRAME_HEADER_BYTES: u64 = 5;
/// The body bytes `pqtls serve --quic` puts in one DATA frame.
const H3_DATA_FRAME_BYTES: u64 = 16 * 1024;

impl Transfer<'_> {
    /// One scenario's transfers over QUIC (rustls only): the lab of its link, `pqtls serve
    /// --quic` with the scenario's server window, the transfers, the record.
    pub(crate) fn measure_quic(
        &self,
        scenario: &Scenario,
        settings: &Settings,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
        rtt_ns: u64,
    ) -> Result<Measured> {
        let cfg = &scenario.handshake;
        pqtls_quic::h3::require_rustls(cfg.stack)?;
        let network = &scenario.network;
        let mtu = scenario.load.quic_initial_mtu.map(|m| u16::try_from(m).unwrap_or(u16::MAX));
        let tuning = Tuning { initial_mtu_bytes: mtu, address_tokens: scenario.load.quic_token, ..Tuning::default() };
        tuning.validate()?;
        let server_tuning = tuning.with_initcwnd(network.server_window())?;
        let client_tuning = tuning.with_initcwnd(network.client_window())?;
        let files = (self.stacks.pki)(cfg)?;
        // The client's key log has both sides' secrets (Wireshark needs no more).
        let (client_tls, _) = pqtls_quic::h3::configs(cfg, &files, self.setup.key_log.clone())?;

        let (link, opts, client, before, after, run, counters, emulator) =
            self.links.with_lab(network, interrupt, progress, |lab, link, progress| {
                let any: SocketAddr = "0.0.0.0:0".parse().expect("a valid address");
                // The UDP socket belongs to the namespace of the thread that binds it.
                let server = lab
                    .within(
                        Side::Server,
                        || crate::carrier::quic::serve_tuned(any, 1, cfg, &files, server_tuning, None),
                        || {},
                    )
                    .map_err(netlab_error)??;
                let path = format!("/{}", units::format_bytes(scenario.load.response_bytes).replace(' ', ""));
                let addr = SocketAddr::from((lab.server_addr(), server.addr().port()));
                // The TCP generator's options stand for the run in the record (URL, timing, one
                // connection at a time); the QUIC generator runs with the same.
                let client = QuicClient::new(cfg, &files, client_tls, client_tuning);
                let opts = LoadOptions {
                    expect: expect(scenario),
                    stalls: self.links.stall_screen(lab, Some(crate::links::most_again(settings.load.requests))),
                    ..options(settings, Target::parse(&format!("https://{addr}{path}"))?, Client::Quic(client.clone()))
                };
                if client.tokens.is_some() {
                    // The first contact, unmeasured: its NEW_TOKEN frames fill the run's store.
                    let prime = LoadOptions {
                        warmup: std::time::Duration::ZERO,
                        requests: Some(1),
                        timelines: false,
                        ..opts.clone()
                    };
                    let primed =
                        in_client(lab, settings, &mut |_| {}, |report| quic_load::run(&prime, interrupt, report))??;
                    if primed.requests == 0 {
                        return Err(Error::Other(format!(
                            "quic_token = true: the first connection, which receives the token, failed: {:?}",
                            primed.errors
                        )));
                    }
                }
                let before = server.counters();
                lab.reset_emulator();
                let ran = in_client(lab, settings, progress, |report| quic_load::run_counted(&opts, interrupt, report));
                let emulator = lab.emulator_report();
                let emulator_ok = lab.check_emulator();
                let after = server.stop();
                let (run, counters) = ran??;
                emulator_ok.map_err(netlab_error)?;
                Ok((link, opts, client, before, after, run, counters, emulator))
            })?;
        completed(&run, settings, " over QUIC")?;
        let messages = match &run.messages {
            Some(Ok(m)) => m.clone(),
            _ => return Err(Error::Other("the QUIC handshake's message sizes were not observed".into())),
        };
        crate::transfer::check_client_auth(cfg.client_chain.is_some(), &messages)?;
        let terminator = Terminator {
            name: "pqtls".into(),
            version: format!(
                "pqtls serve --quic {} (rustls; quinn + h3) in the lab's server namespace",
                self.stacks.backend(Stack::Rustls)?.library_version()
            ),
            backend: None,
        };
        let server_side = crate::shared::server_side(
            &crate::carrier::quic::stats(&before),
            &crate::carrier::quic::stats(&after),
            true,
        );
        let mut load = crate::shared::load_result(&opts, &run, terminator, Some(server_side), None);
        load.notes.push(
            "QUIC: no tcp layer (tcp and tcp_to_tls are 0), tls is first Initial → handshake done at the client; \
             handshake bytes are TLS messages (CRYPTO data) without QUIC headers, tags or padding"
                .into(),
        );
        let mut result = transfer_result(load, link, emulator, &opts, scenario, rtt_ns);
        let (handshake, connection) = counters.unwrap_or_default();
        let tokens = scenario.load.quic_token.then(|| TokenUse {
            connections: after.connections - before.connections,
            validated: after.address_validated - before.address_validated,
        });
        if let Some(t) = &tokens {
            if t.validated < t.connections {
                return Err(Error::Other(format!(
                    "quic_token = true: {} of the run's {} connections came without a valid address-validation token                      (the server refused or never received it), so they were first contacts; the measurement is                      not recorded",
                    t.connections - t.validated,
                    t.connections
                )));
            }
        }
        let model = quic_model(&result.load, &result.link, &opts, &client, scenario, rtt_ns, server_tuning);
        result.quic = Some(QuicTransfer { model, handshake, connection, tokens });
        result.rounds = result.rounds_now();
        let record = Record::measured(scenario, settings, &self.stacks.env, Outcome::Transfer(Box::new(result)));
        Ok(Measured { record, samples: Vec::new() })
    }
}

/// What a QUIC transfer must negotiate: the scenario's group, suite and the leaf's signature
/// scheme (the client trusts the PKI, so the server's CertificateVerify is the leaf's).
fn expect(scenario: &Scenario) -> Expect {
    let h = &scenario.handshake;
    Expect {
        group: Some(h.expected_group().name.to_string()),
        cipher: Some(h.cipher.name.to_string()),
        sigalg: Some(h.chain.leaf.scheme.to_string()),
    }
}

/// The QUIC model's inputs: the measured handshake's message sizes, the HTTP/3 request and
/// response, the windows and the datagram size, the verified link, the handshake CPU.
fn quic_model(
    load: &pqtls_core::load::LoadResult,
    link: &pqtls_core::link::LinkReport,
    opts: &LoadOptions,
    q: &QuicClient,
    scenario: &Scenario,
    rtt_ns: u64,
    server: Tuning,
) -> QuicFlightModel {
    let (client_hello_bytes, server_flight_bytes, client_flight_bytes, ticket_bytes) =
        QuicFlightModel::flights(&load.bytes.clone().unwrap_or_default());
    let body = scenario.load.response_bytes;
    QuicFlightModel {
        datagram_bytes: q.tuning.datagram_bytes(),
        client_initial_window_bytes: q.tuning.window_bytes(),
        server_initial_window_bytes: server.window_bytes(),
        client_hello_bytes,
        server_flight_bytes,
        client_flight_bytes,
        request_bytes: H3_REQUEST_OVERHEAD_BYTES + (opts.target.path.len() + opts.target.host.len()) as u64,
        response_bytes: ticket_bytes
            + H3_RESPONSE_OVERHEAD_BYTES
            + body
            + body.div_ceil(H3_DATA_FRAME_BYTES) * H3_DATA_FRAME_HEADER_BYTES,
        rtt_ns: if link.rtt.median_ns > 0 { link.rtt.median_ns } else { rtt_ns },
        bits_per_s: scenario.network.bits_per_s,
        client_cpu_ns: load.client_handshake_cpu_ns_mean.round() as u64,
        server_cpu_ns: load.server.as_ref().map_or(0, |s| s.handshake_cpu_ns_mean.round() as u64),
        mtu_probes_bytes: quinn_mtu_probes(server.datagram_bytes()),
        // Every connection came with a valid token (checked against the server's count).
        address_validated: server.address_tokens,
    }
}
