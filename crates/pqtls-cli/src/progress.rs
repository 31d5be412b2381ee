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
        View { style, bar, started: Instant::now(), label: String::new() }
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
                    let per = self.started.elapsed().as_secs_f64() / index.max(1) as f64;
                    let eta = (per * (todo - index) as f64) as u64;
                    let median = record.insitu().map_or(String::new(), |r| {
                        format!(": {:.0} µs median handshake CPU", r.total_cpu_ns.median / 1000.0)
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

/// One line on stderr. A reader that went away (`pqtls run … 2>&1 | head -1`) must not stop
/// the measurement: write errors are ignored (with SIGPIPE ignored during a run, a closed pipe
/// is an error here, not the end of the process), and the results store holds what matters.
pub fn line(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}
