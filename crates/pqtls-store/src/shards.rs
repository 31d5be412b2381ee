//! Load records measured in shards (`pqtls load --shard K/N`: N load generators, e.g. the pods
//! of a Kubernetes Indexed Job, each driving one endpoint with 1/N of the target rate or of the
//! connections) joined into the record of the whole run: counts and rates add, latency
//! distributions merge exactly through their HdrHistograms (never averages of percentiles),
//! errors add by kind.

use pqtls_core::load::{add_errors, ErrorCount, HandshakePhases, Latency, LoadResult, ServerHeap, ServerSide};
use pqtls_core::record::{Outcome, Record};

/// Whether `r` is one shard of a sharded load run.
pub fn is_load_shard(r: &Record) -> bool {
    r.load().is_some_and(|l| l.shard.is_some())
}

/// The record of the whole run from its shards: `parts` are (where it came from, record), all
/// of one id, every one a load record with `shard = Some(K/N)`. Every shard 1…N must be there
/// exactly once and they must have measured the same thing (URL, negotiated parameters,
/// terminator, loop mode); the error names what is missing, duplicated or different.
///
/// - requests, handshakes, unfinished, threads, target and achieved rates add; connections
///   per thread are the shards' total connections over their total threads (rounded up);
/// - the measured duration is the longest shard's (they ran at the same time); the per-second
///   counts add second by second, over the seconds every shard has;
/// - latency, time to first byte and every layer: the shards' histograms added, then summarised;
/// - client CPU per handshake (per request): the shards' means weighted by their handshakes
///   (requests);
/// - errors add by kind (the last message of the last shard that saw the kind is kept);
/// - the server's counters (pqtls serve's own): the shards read the same server over
///   overlapping windows, so its counts are not added — the largest is kept — and its CPU per
///   handshake is the handshake-weighted mean; a note says so.
pub fn merge_load_shards(parts: &[(String, Record)]) -> Result<Record, String> {
    let Some((_, first)) = parts.first() else { return Err("no shards to merge".into()) };
    let id = &first.id;
    let loads = shards_in_order(id, parts)?;
    let count = loads[0].1.shard.map_or(0, |s| s.count);
    same_run(id, &loads)?;
    let (from0, a) = loads[0];
    let sum_u = |f: &dyn Fn(&LoadResult) -> u64| loads.iter().map(|(_, l)| f(l)).sum::<u64>();
    let sum_f = |f: &dyn Fn(&LoadResult) -> f64| loads.iter().map(|(_, l)| f(l)).sum::<f64>();
    let weighted = |f: &dyn Fn(&LoadResult) -> f64, w: &dyn Fn(&LoadResult) -> u64| {
        let total = sum_u(w);
        if total == 0 {
            0.0
        } else {
            loads.iter().map(|(_, l)| f(l) * w(l) as f64).sum::<f64>() / total as f64
        }
    };
    let merged = |get: &dyn Fn(&LoadResult) -> &Latency, what: &str| -> Result<Latency, String> {
        let mut h = get(a).histogram().map_err(|e| format!("{id}: {what} of {from0}: {e}"))?;
        for (from, l) in &loads[1..] {
            let other = get(l).histogram().map_err(|e| format!("{id}: {what} of {from}: {e}"))?;
            h.add(other).map_err(|e| format!("{id}: merging the {what} of {from}: {e:?}"))?;
        }
        Ok(Latency::of(&h))
    };
    let mut layers = indexmap::IndexMap::new();
    for name in a.layers.keys() {
        layers.insert(name.clone(), merged(&|l: &LoadResult| &l.layers[name], &format!("layer {name}"))?);
    }
    let mut errors: Vec<ErrorCount> = Vec::new();
    for (_, l) in &loads {
        add_errors(&mut errors, &l.errors);
    }
    let mut notes =
        vec![format!("merged from {count} shards ({})", loads.iter().map(|(f, _)| *f).collect::<Vec<_>>().join(", "))];
    for (_, l) in &loads {
        let k = l.shard.map_or(0, |s| s.index);
        notes.extend(l.notes.iter().map(|n| format!("shard {k}/{count}: {n}")));
    }
    let server = server_side(&loads, count, &mut notes);
    let stopped =
        if loads.iter().any(|(_, l)| l.stopped == "interrupted") { "interrupted" } else { a.stopped.as_str() };
    let seconds = loads.iter().map(|(_, l)| l.per_second.len()).min().unwrap_or(0);
    let per_second: Vec<u64> = (0..seconds).map(|i| loads.iter().map(|(_, l)| l.per_second[i]).sum()).collect();
    let threads = sum_u(&|l| l.threads);
    let concurrency = sum_u(&|l| l.threads * l.connections);
    let connections = if threads == 0 { a.connections } else { concurrency.div_ceil(threads) };
    if loads.iter().any(|(_, l)| l.connections != a.connections) {
        notes.push(format!(
            "{concurrency} connections in all over {threads} threads (the shards had different numbers)"
        ));
    }
    let result = LoadResult {
        client_hello_segments: loads.iter().find_map(|(_, l)| l.client_hello_segments),
        client_hello_datagrams: loads.iter().find_map(|(_, l)| l.client_hello_datagrams),
        url: a.url.clone(),
        negotiated: a.negotiated.clone(),
        terminator: a.terminator.clone(),
        loop_mode: a.loop_mode.clone(),
        target_rate_per_s: loads.iter().map(|(_, l)| l.target_rate_per_s).sum::<Option<f64>>(),
        achieved_rate_per_s: sum_f(&|l| l.achieved_rate_per_s),
        duration_ns: loads.iter().map(|(_, l)| l.duration_ns).max().unwrap_or(0),
        requests: sum_u(&|l| l.requests),
        handshakes: sum_u(&|l| l.handshakes),
        handshakes_per_s: sum_f(&|l| l.handshakes_per_s),
        unfinished: sum_u(&|l| l.unfinished),
        latency: merged(&|l: &LoadResult| &l.latency, "latency")?,
        ttfb: merged(&|l: &LoadResult| &l.ttfb, "time to first byte")?,
        client_handshake_cpu_ns_mean: weighted(&|l| l.client_handshake_cpu_ns_mean, &|l| l.handshakes),
        client_phases: merged_phases(loads.iter().map(|(_, l)| (l.client_phases, l.handshakes))),
        client_verify_cpu_ns_mean: loads
            .iter()
            .all(|(_, l)| l.client_verify_cpu_ns_mean.is_some())
            .then(|| weighted(&|l| l.client_verify_cpu_ns_mean.unwrap_or(0.0), &|l| l.handshakes)),
        client_process_cpu_ns_per_request: weighted(&|l| l.client_process_cpu_ns_per_request, &|l| l.requests),
        server,
        bytes: loads.iter().find_map(|(_, l)| l.bytes.clone()),
        per_second,
        errors,
        capture: None,
        terminator_processes: None,
        link: a.link.clone(),
        emulator: None,
        layers,
        shard: None,
        stopped: stopped.to_string(),
        threads,
        connections,
        notes,
        trust: a.trust.clone(),
        stalls: None,
    };
    let mut record = first.clone();
    record.measured_at = parts.iter().map(|(_, r)| r.measured_at).max().unwrap_or(0);
    record.result = Outcome::Load(Box::new(result));
    Ok(record)
}

/// The shards of one id (`parts`), checked (every shard 1…N once, of one count), in shard order.
fn shards_in_order<'a>(id: &str, parts: &'a [(String, Record)]) -> Result<Vec<(&'a str, &'a LoadResult)>, String> {
    let mut loads: Vec<(&str, &LoadResult)> = Vec::new();
    for (from, r) in parts {
        match r.load() {
            Some(l) if l.shard.is_some() && r.id == *id => loads.push((from, l)),
            _ => return Err(format!("{id}: {from} holds a {} record that is not a shard of it", r.kind().name())),
        }
    }
    let count = loads[0].1.shard.map_or(0, |s| s.count);
    let mut by_index: Vec<Option<&str>> = vec![None; count as usize];
    for (from, l) in &loads {
        let s = l.shard.expect("filtered above");
        if s.count != count {
            return Err(format!(
                "{id}: its shards disagree on how many there are ({} in {}, {}/{} in {from}); merge the shards of one run",
                format_args!("{}/{count}", loads[0].1.shard.map_or(0, |s| s.index)),
                loads[0].0,
                s.index,
                s.count
            ));
        }
        let slot = &mut by_index[(s.index - 1) as usize];
        if let Some(other) = slot {
            return Err(format!(
                "{id}: shard {}/{count} is given twice (in {other} and {from}); give each shard's output once",
                s.index
            ));
        }
        *slot = Some(from);
    }
    let missing: Vec<String> =
        by_index.iter().enumerate().filter(|(_, f)| f.is_none()).map(|(i, _)| format!("{}/{count}", i + 1)).collect();
    if !missing.is_empty() {
        return Err(format!(
            "{id}: shard{} {} of {count} {} missing (have {}): merge the output of every load generator, or measure \
             the missing one{} again (pqtls load … --shard K/{count})",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            if missing.len() == 1 { "is" } else { "are" },
            loads.len(),
            if missing.len() == 1 { "" } else { "s" }
        ));
    }
    loads.sort_by_key(|(_, l)| l.shard.map_or(0, |s| s.index));
    Ok(loads)
}

/// Shards measured the same thing: URL, negotiated parameters, terminator, loop mode, layers.
fn same_run(id: &str, loads: &[(&str, &LoadResult)]) -> Result<(), String> {
    let (from0, a) = loads[0];
    for (from, b) in &loads[1..] {
        let differs = |what: &str, x: String, y: String| {
            format!(
                "{id}: shards measured different {what} ({x} in {from0}, {y} in {from}); merge the shards of one run"
            )
        };
        if b.url != a.url {
            return Err(format!(
                "{}; shards drive one endpoint: give every load generator the same URL (without one, each \
                 pqtls load starts a server of its own)",
                differs("URLs", a.url.clone(), b.url.clone())
            ));
        }
        if b.negotiated != a.negotiated {
            return Err(differs("parameters", format!("{:?}", a.negotiated), format!("{:?}", b.negotiated)));
        }
        if b.terminator != a.terminator {
            return Err(differs("terminators", a.terminator.name.clone(), b.terminator.name.clone()));
        }
        if b.loop_mode != a.loop_mode {
            return Err(differs("loop modes", a.loop_mode.clone(), b.loop_mode.clone()));
        }
        if b.layers.keys().ne(a.layers.keys()) {
            let names = |l: &LoadResult| l.layers.keys().cloned().collect::<Vec<_>>().join(",");
            return Err(differs("layers", names(a), names(b)));
        }
    }
    Ok(())
}

/// The server's counters from the shards that have them (not added: they read one server over
/// overlapping windows), with notes saying so.
fn server_side(loads: &[(&str, &LoadResult)], count: u32, notes: &mut Vec<String>) -> Option<ServerSide> {
    let servers: Vec<&ServerSide> = loads.iter().filter_map(|(_, l)| l.server.as_ref()).collect();
    if servers.is_empty() {
        None
    } else {
        if servers.len() < loads.len() {
            notes.push(format!("server counters from {} of {count} shards only", servers.len()));
        }
        notes.push(
            "server counters: every shard read the same server over overlapping windows, so they are not added: \
             the largest counts are kept, CPU per handshake is the handshake-weighted mean"
                .into(),
        );
        let total: u64 = servers.iter().map(|s| s.handshakes).sum();
        let mean = |f: &dyn Fn(&ServerSide) -> f64| {
            if total == 0 {
                0.0
            } else {
                servers.iter().map(|s| f(s) * s.handshakes as f64).sum::<f64>() / total as f64
            }
        };
        let mut errors = Vec::new();
        for s in &servers {
            add_errors(&mut errors, &s.errors);
        }
        Some(ServerSide {
            handshakes: servers.iter().map(|s| s.handshakes).max().unwrap_or(0),
            requests: servers.iter().map(|s| s.requests).max().unwrap_or(0),
            handshake_cpu_ns_mean: mean(&|s| s.handshake_cpu_ns_mean),
            process_cpu_ns_per_handshake: servers
                .iter()
                .all(|s| s.process_cpu_ns_per_handshake.is_some())
                .then(|| mean(&|s| s.process_cpu_ns_per_handshake.unwrap_or(0.0))),
            heap: merged_heap(&servers),
            phases: merged_phases(servers.iter().map(|s| (s.phases, s.handshakes))),
            errors,
        })
    }
}

/// Handshake phases of shards: the handshake-weighted mean, when every shard has them.
fn merged_phases(parts: impl Iterator<Item = (Option<HandshakePhases>, u64)> + Clone) -> Option<HandshakePhases> {
    let total: u64 = parts.clone().map(|(_, n)| n).sum();
    let all: Vec<(HandshakePhases, u64)> = parts.map(|(p, n)| p.map(|p| (p, n))).collect::<Option<_>>()?;
    let mean = |f: fn(&HandshakePhases) -> f64| all.iter().map(|(p, n)| f(p) * *n as f64).sum::<f64>() / total as f64;
    (total > 0).then(|| HandshakePhases {
        first_flight_cpu_ns_mean: mean(|p| p.first_flight_cpu_ns_mean),
        completion_cpu_ns_mean: mean(|p| p.completion_cpu_ns_mean),
    })
}

/// The server's heap per connection of shards that read one server over overlapping windows:
/// the connection-weighted mean of theirs (when every shard has it), the largest count.
fn merged_heap(servers: &[&ServerSide]) -> Option<ServerHeap> {
    let heaps: Vec<&ServerHeap> = servers.iter().map(|s| s.heap.as_ref()).collect::<Option<_>>()?;
    let total: u64 = heaps.iter().map(|h| h.connections).sum();
    if total == 0 {
        return None;
    }
    let mean =
        |f: fn(&ServerHeap) -> f64| heaps.iter().map(|h| f(h) * h.connections as f64).sum::<f64>() / total as f64;
    Some(ServerHeap {
        connections: heaps.iter().map(|h| h.connections).max().unwrap_or(0),
        allocations_per_connection: mean(|h| h.allocations_per_connection),
        allocated_bytes_per_connection: mean(|h| h.allocated_bytes_per_connection),
        retained_bytes_per_connection: mean(|h| h.retained_bytes_per_connection),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::load::LoadShare;
    use pqtls_testkit::synthetic::load::{shards, study_scenario};

    fn parts(n: u32) -> Vec<(String, Record)> {
        // Terminated by pqtls serve (rustls): the records have server counters.
        let sc = study_scenario("x25519_mlkem512", "mldsa44:mldsa44", 4).with([("rate", "900/s")]).unwrap();
        shards(&sc, n).into_iter().enumerate().map(|(i, r)| (format!("pod-{}", i + 1), r)).collect()
    }

    #[test]
    fn shards_merge_exactly() {
        let mut p = parts(3);
        {
            // Errors of one kind in two shards, another kind in one.
            let Outcome::Load(l) = &mut p[0].1.result else { unreachable!() };
            l.errors = vec![ErrorCount { kind: "tls".into(), count: 2, last: "a".into() }];
            let Outcome::Load(l) = &mut p[2].1.result else { unreachable!() };
            l.errors = vec![
                ErrorCount { kind: "timeout".into(), count: 1, last: "t".into() },
                ErrorCount { kind: "tls".into(), count: 5, last: "c".into() },
            ];
        }
        let m = merge_load_shards(&p).unwrap();
        let ls: Vec<&LoadResult> = p.iter().map(|(_, r)| r.load().unwrap()).collect();
        let l = m.load().unwrap();
        assert_eq!(l.shard, None);
        assert_eq!(l.requests, ls.iter().map(|x| x.requests).sum::<u64>());
        assert_eq!(l.handshakes, ls.iter().map(|x| x.handshakes).sum::<u64>());
        assert_eq!(l.latency.count, l.requests);
        assert_eq!((l.threads, l.connections), (12, 1));
        let seconds = ls.iter().map(|x| x.per_second.len()).min().unwrap();
        assert_eq!(l.per_second.len(), seconds);
        assert_eq!(l.per_second[0], ls.iter().map(|x| x.per_second[0]).sum::<u64>());
        assert_eq!(l.target_rate_per_s, Some(900.0));
        assert_eq!(l.achieved_rate_per_s, ls.iter().map(|x| x.achieved_rate_per_s).sum::<f64>());
        // The merged median is the median of the summed histogram, not an average of medians.
        let mut all = ls[0].latency.histogram().unwrap();
        for x in &ls[1..] {
            all.add(x.latency.histogram().unwrap()).unwrap();
        }
        assert_eq!(l.latency.p50_ns, all.value_at_quantile(0.5));
        assert_eq!(l.latency.p999_ns, all.value_at_quantile(0.999));
        assert_eq!(l.latency, Latency::of(&all));
        assert_eq!(l.latency.max_ns, ls.iter().map(|x| x.latency.max_ns).max().unwrap());
        assert_eq!(
            l.errors,
            vec![
                ErrorCount { kind: "tls".into(), count: 7, last: "c".into() },
                ErrorCount { kind: "timeout".into(), count: 1, last: "t".into() },
            ]
        );
        assert!(l.notes[0].starts_with("merged from 3 shards (pod-1, pod-2, pod-3)"), "{:?}", l.notes);
        // Server counters of the same server are not added.
        let s = l.server.as_ref().unwrap();
        assert_eq!(s.handshakes, ls.iter().map(|x| x.server.as_ref().unwrap().handshakes).max().unwrap());
    }

    #[test]
    fn a_missing_duplicated_or_foreign_shard_is_refused_by_name() {
        let p = parts(3);
        let e = merge_load_shards(&[p[0].clone(), p[2].clone()]).unwrap_err();
        assert!(e.contains("shard 2/3 of 3 is missing (have 2)") && e.contains("--shard K/3"), "{e}");
        let e = merge_load_shards(&[p[0].clone(), p[1].clone(), p[1].clone(), p[2].clone()]).unwrap_err();
        assert!(e.contains("shard 2/3 is given twice (in pod-2 and pod-2)"), "{e}");
        let four = parts(4);
        let e = merge_load_shards(&[p[0].clone(), four[1].clone(), p[2].clone()]).unwrap_err();
        assert!(e.contains("disagree on how many"), "{e}");
        let mut other = p[1].clone();
        if let Outcome::Load(l) = &mut other.1.result {
            l.url = "https://elsewhere/".into();
            l.shard = Some(LoadShare { index: 2, count: 3 });
        }
        let e = merge_load_shards(&[p[0].clone(), other, p[2].clone()]).unwrap_err();
        assert!(e.contains("different URLs"), "{e}");
    }
}
