//! The factor flags (`--group`, `--chain`, `--transport`, …), made from the factor table: one
//! flag per factor, with its aliases and help. A comma separates the values of a matrix (one
//! scenario each); `+` joins the items of one value (`--key-shares X25519MLKEM768+x25519`).
//! The matrix expands exactly as an experiment file's does, so equal matrices give equal ids.

use anyhow::{bail, Context, Result};
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use indexmap::IndexMap;
use pqtls_core::factor::{Kind, FACTORS};
use pqtls_core::scenario::Scenario;
use std::path::PathBuf;

/// Factor → the values given on the command line (canonical), in table order.
#[derive(Clone, Debug, Default)]
pub struct Factors {
    pub given: IndexMap<&'static str, Vec<String>>,
    /// Directory of the PKI cache.
    pub pki: PathBuf,
}

impl Args for Factors {
    fn augment_args(mut cmd: Command) -> Command {
        for f in FACTORS {
            let default = f.default.map(|d| format!(" [default: {d}]")).unwrap_or_default();
            let mut a = Arg::new(f.name)
                .long(f.flag())
                .help(format!("{}{default}", f.help))
                .value_delimiter(',')
                .action(ArgAction::Append)
                .value_name(if f.boolean { "BOOL" } else { "VALUES" });
            for alias in f.aliases {
                a = a.visible_alias(alias.replace('_', "-"));
            }
            if f.boolean {
                a = a.num_args(0..=1).default_missing_value("true");
            }
            if takes_numbers(f) {
                // `--rate -1/s`, `--rtt -5ms`: the factor's parser says what the flag takes
                // (clap would call the value an unexpected argument).
                a = a.allow_hyphen_values(true);
            }
            cmd = cmd.arg(a);
        }
        cmd.arg(
            Arg::new("pki")
                .long("pki")
                .help("Directory of the PKI cache")
                .value_parser(clap::value_parser!(PathBuf))
                .default_value(crate::context::default_pki_dir().into_os_string()),
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// A factor whose values are numbers (with or without a unit): its flag accepts a value that
/// starts with `-`, so that a negative one is answered by the factor's own parser.
fn takes_numbers(f: &pqtls_core::factor::Factor) -> bool {
    !f.boolean && ["0", "1", "1ms", "1mbit", "1/s", "1KiB", "1%"].iter().any(|v| (f.canonical)(v).is_ok())
}

impl FromArgMatches for Factors {
    fn from_arg_matches(m: &ArgMatches) -> std::result::Result<Self, clap::Error> {
        let mut out = Factors::default();
        out.update_from_arg_matches(m)?;
        Ok(out)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> std::result::Result<(), clap::Error> {
        for f in FACTORS {
            if let Some(vals) = m.get_many::<String>(f.name) {
                self.given.insert(f.name, vals.cloned().collect());
            }
        }
        if let Some(p) = m.get_one::<PathBuf>("pki") {
            self.pki = p.clone();
        }
        Ok(())
    }
}

impl Factors {
    /// The one scenario of commands that take a single configuration (`serve`): a factor
    /// given several values is an error naming it.
    pub fn single(&self) -> Result<Scenario> {
        if let Some((f, v)) = self.given.iter().find(|(_, v)| v.len() > 1) {
            bail!("--{} takes one value here, not {} ({})", f.replace('_', "-"), v.len(), v.join(","));
        }
        let given: Vec<(&str, &str)> = self.given.iter().map(|(f, v)| (*f, v[0].as_str())).collect();
        let s = Scenario::new(given)?;
        s.handshake.validate()?;
        Ok(s)
    }

    /// The scenarios: the product of every factor's values (first factor outermost, as in an
    /// experiment file), each validated for `kind`. A value given twice is an error.
    pub fn scenarios(&self, kind: Kind) -> Result<Vec<Scenario>> {
        let mut lists: Vec<(&'static str, Vec<String>)> = Vec::new();
        for f in FACTORS {
            let vals = match self.given.get(f.name) {
                Some(vals) => {
                    let mut canon: Vec<String> = Vec::new();
                    for v in vals {
                        let c = (f.canonical)(v).with_context(|| format!("--{} {v}", f.flag()))?;
                        pqtls_core::factor::refuse_written(f, kind, v)
                            .with_context(|| format!("--{} {v}", f.flag()))?;
                        if canon.contains(&c) {
                            bail!("--{} lists {c} twice; give each value once", f.flag());
                        }
                        canon.push(c);
                    }
                    if canon.is_empty() {
                        bail!("--{} has no value; e.g. {}", f.flag(), f.example);
                    }
                    // A flag the measurement does not read is refused at its default value too
                    // (other values are refused by `validate_for`): it would be accepted and
                    // ignored.
                    if !f.used_by.contains(&kind) && canon.iter().all(|c| Some(c.as_str()) == f.default) {
                        bail!(
                            "--{} is not measurable by the {} measurement (it applies to: {}); leave it out",
                            f.flag(),
                            kind.name(),
                            f.used_by.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
                        );
                    }
                    canon
                }
                None => vec![f.default_or_required()?.to_string()],
            };
            lists.push((f.name, vals));
        }
        let (n, how) = pqtls_core::factor::count_points(&lists);
        if let Some(why) = pqtls_core::factor::too_many_configurations(n, &how, pqtls_core::factor::MAX_CONFIGURATIONS)
        {
            bail!("{why}");
        }
        let mut out: Vec<Scenario> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for point in pqtls_core::factor::product(&lists) {
            let s = Scenario::from_canonical(&point.into_iter().collect())?;
            s.validate_for(kind).with_context(|| format!("scenario {} on {}", s.label(), s.handshake.stack))?;
            if seen.insert(s.id()) {
                out.push(s);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_numeric_factors_take_hyphen_values() {
        let numeric: Vec<&str> =
            pqtls_core::factor::FACTORS.iter().filter(|f| super::takes_numbers(f)).map(|f| f.name).collect();
        assert_eq!(
            numeric,
            [
                "auth_bytes",
                "threads",
                "connections",
                "rate",
                "response_size",
                "rtt",
                "bandwidth",
                "loss",
                "jitter",
                "initcwnd",
                "client_initcwnd",
                "server_initcwnd"
            ]
        );
    }
}
