//! How a run looks on the terminal: the runner's events drawn as a progress bar (or as one
//! line per scenario for batch logs, or not at all).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pqtls_lab::Event;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// A bar on stderr for the scenario being measured.
    Bar,
    /// One line per scenario on stderr (`[3/12] label: 412 µs median, ETA 0:01:10`).
    Lines,
}

pub struct View {
    style: Style,
    bar: ProgressBar,
    started: Instant,
    label: String,
    /// Scenarios opened so far (prepared and warmed up; with an interleaved schedule, a
    /// window's at once).
    opened: usize,
    /// What each scenario takes at least by its settings (a load's warm-up and duration), s:
    /// the ETA is never below it.
    floor_each_s: f64,
}

impl View {
    pub fn new(style: Style) -> View {
        let bar = match style {
            Style::Bar => ProgressBar::new(0),
            Style::Lines => ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden()),
        };
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} eta {eta} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        View { style, bar, started: Instant::now(), label: String::new(), opened: 0, floor_each_s: 0.0 }
    }

    /// The ETA's floor: what the run's settings ask of each scenario at least
    /// ([`pqtls_lab::estimate::Work`]).
    pub fn with_floor(mut self, work: &pqtls_lab::estimate::Work) -> View {
        if let Some(ms) = work.at_least_ms.filter(|_| work.configurations > 0) {
            self.floor_each_s = ms as f64 / 1000.0 / work.configurations as f64;
        }
        self
    }

    /// Prints a line above the bar.
    pub fn println(&self, text: impl AsRef<str>) {
        if self.style == Style::Bar && !self.bar.is_hidden() {
            self.bar.println(text.as_ref());
        } else {
            line(text.as_ref());
        }
    }

    pub fn event(&mut self, e: Event) {
        match e {
            Event::Notice(n) => self.println(format!("note: {n}")),
            Event::Start { index, todo, scenario } => {
                self.opened += 1;
                self.label = format!("{} {}", scenario.handshake.stack, scenario.label());
                if self.style == Style::Bar {
                    self.bar.reset();
                    self.println(format!("[{index}/{todo}] {}", self.label));
                }
            }
            Event::Block { scenario, .. } => {
                // Interleaved: the bar follows the scenario whose block is being measured.
                self.label = format!("{} {}", scenario.handshake.stack, scenario.label());
            }
            Event::Progress(p) => {
                for note in &p.notes {
                    self.println(format!("note: {note}"));
                }
                self.bar.set_length(p.target);
                self.bar.set_position(p.done);
                let extra = match &p.worst {
                    Some((step, rel)) if rel.is_finite() => format!(" · widest CI: {step} ±{:.1}%", rel * 100.0),
                    _ => String::new(),
                };
                self.bar.set_prefix(format!("{:>9}", p.phase));
                self.bar.set_message(format!("{}{extra}", self.label));
            }
            Event::Stored { index, todo, record } => {
                if self.style == Style::Lines {
                    let eta = eta_s(self.started.elapsed().as_secs_f64(), self.opened, index, todo)
                        .max((self.floor_each_s * todo.saturating_sub(self.opened.max(index)) as f64) as u64);
                    let median = record.insitu().map_or(String::new(), |r| match r.unit {
                        pqtls_core::trace::CostUnit::Ns => {
                            format!(": {:.0} µs median handshake CPU", r.total_cpu_ns.median / 1000.0)
                        }
                        pqtls_core::trace::CostUnit::Instructions => {
                            format!(": {:.0} k instructions median handshake", r.total_cpu_ns.median / 1000.0)
                        }
                    });
                    line(&format!(
                        "[{index}/{todo}] {} {}{median}, ETA {}:{:02}:{:02}",
                        record.factor("stack"),
                        record.label,
                        eta / 3600,
                        eta / 60 % 60,
                        eta % 60
                    ));
                }
            }
            Event::Failed { id, error } => self.println(format!("{id}: {error}")),
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Seconds still to go, when `stored` of `todo` scenarios are stored and `opened` were opened
/// in `elapsed_s`: the time per opened scenario times those not opened yet. (Per stored one
/// would be wrong with windows whose records are stored together: the first of a window of 12
/// comes after all 12 were measured.)
fn eta_s(elapsed_s: f64, opened: usize, stored: usize, todo: usize) -> u64 {
    let done = opened.max(stored).max(1);
    (elapsed_s / done as f64 * todo.saturating_sub(done) as f64) as u64
}

/// One line on stderr. A reader that went away (`pqtls run … 2>&1 | head -1`) must not stop
/// the measurement: write errors are ignored (with SIGPIPE ignored during a run, a closed pipe
/// is an error here, not the end of the process), and the results store holds what matters.
pub fn line(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

#[cfg(test)]
mod tests {
    use super::eta_s;

    #[test]
    fn the_eta_counts_scenarios_opened_not_records_stored() {
        // One after another: 3 of 12 stored in 30 s, the fourth not opened yet.
        assert_eq!(eta_s(30.0, 3, 3, 12), 90);
        // One window of 12, its records stored together after 96 s: nothing left.
        assert_eq!(eta_s(96.0, 12, 1, 12), 0);
        // Windows of 4: the first window closed after 40 s, 8 to go.
        assert_eq!(eta_s(40.0, 4, 1, 12), 80);
        assert_eq!(eta_s(0.0, 0, 0, 0), 0);
    }
}
