//! Warnings about single records, grouped for the top of a report (issue 20): a set measured
//! on a busy machine warns about most of its configurations alike, and a report should say so
//! once, not once per configuration.
//!
//! **The grouping key** is the warning's text with every number abstracted ([`Template`]):
//! warnings of one kind differ only in their numbers (`other processes used 30 % …`, `… 34 %
//! …`), warnings of different kinds differ in their words. A group of one is written as
//! before (`Warning: <subject>: <text>`); a larger group once, with each number that differs
//! between its members as their range (`30–34`), followed by the subjects it concerns.

/// At most this many subjects are named on a grouped line; the rest are counted.
pub const SUBJECTS_NAMED: usize = 12;

/// One record's warning: whom it concerns (a configuration, as the report names it) and what.
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    pub subject: String,
    pub text: String,
}

/// A warning text split at its numbers: the words between them (one more piece than numbers)
/// and the numbers as written. Numbers are runs of ASCII digits with at most one inner
/// decimal point (`30`, `0.25`); signs and units stay in the words.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    pub words: Vec<String>,
    pub numbers: Vec<String>,
}

impl Template {
    pub fn of(text: &str) -> Template {
        let mut words = vec![String::new()];
        let mut numbers: Vec<String> = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if !chars[i].is_ascii_digit() {
                words.last_mut().expect("one piece more than numbers").push(chars[i]);
                i += 1;
                continue;
            }
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            if i + 1 < chars.len() && chars[i] == '.' && chars[i + 1].is_ascii_digit() {
                i += 1;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
            }
            numbers.push(chars[start..i].iter().collect());
            words.push(String::new());
        }
        Template { words, numbers }
    }
}

/// Warnings whose texts share a [`Template`]'s words, in the order of their first member.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub words: Vec<String>,
    /// Each member's subject and numbers, in order.
    pub members: Vec<(String, Vec<String>)>,
}

impl Group {
    /// The text with each number slot as its value, or its range where members differ.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (slot, w) in self.words.iter().enumerate() {
            out += w;
            if slot + 1 < self.words.len() {
                out += &self.slot(slot);
            }
        }
        out
    }

    /// Number slot `i` over the members: the one value, or `lowest–highest` as written.
    fn slot(&self, i: usize) -> String {
        let values: Vec<&str> = self.members.iter().map(|(_, n)| n[i].as_str()).collect();
        let value = |s: &&str| s.parse::<f64>().unwrap_or(f64::NAN);
        let low = values.iter().min_by(|a, b| value(a).total_cmp(&value(b)));
        let high = values.iter().max_by(|a, b| value(a).total_cmp(&value(b)));
        match (low, high) {
            (Some(l), Some(h)) if value(l) != value(h) => format!("{l}–{h}"),
            (Some(l), _) => l.to_string(),
            _ => String::new(),
        }
    }

    /// Its distinct subjects, in order.
    pub fn subjects(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for (s, _) in &self.members {
            if !out.contains(&s.as_str()) {
                out.push(s);
            }
        }
        out
    }

    /// The report's line: `Warning: <subject>: <text>` for one subject, else `Warning: <text>
    /// — <n> configurations: <subjects>` (the first [`SUBJECTS_NAMED`], then a count).
    pub fn line(&self) -> String {
        let subjects = self.subjects();
        if let [one] = subjects[..] {
            return format!("Warning: {one}: {}", self.text());
        }
        let mut named = subjects.iter().take(SUBJECTS_NAMED).copied().collect::<Vec<_>>().join(", ");
        if subjects.len() > SUBJECTS_NAMED {
            named += &format!(" and {} more", subjects.len() - SUBJECTS_NAMED);
        }
        format!("Warning: {} — {} configurations: {named}", self.text(), subjects.len())
    }
}

/// Groups warnings by their texts' [`Template`] words.
pub fn group(warnings: &[Warning]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for w in warnings {
        let t = Template::of(&w.text);
        let member = (w.subject.clone(), t.numbers);
        match groups.iter_mut().find(|g| g.words == t.words) {
            Some(g) => g.members.push(member),
            None => groups.push(Group { words: t.words, members: vec![member] }),
        }
    }
    groups
}

/// One line per group of alike warnings ([`Group::line`]).
pub fn grouped_lines(warnings: &[Warning]) -> Vec<String> {
    group(warnings).iter().map(Group::line).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(subject: &str, text: &str) -> Warning {
        Warning { subject: subject.into(), text: text.into() }
    }

    #[test]
    fn numbers_are_abstracted_with_their_decimals_and_signs_stay_words() {
        let t = Template::of("achieved 97.0/s of the 100/s asked (-3.0 %) at 2.");
        assert_eq!(t.numbers, ["97.0", "100", "3.0", "2"]);
        assert_eq!(t.words, ["achieved ", "/s of the ", "/s asked (-", " %) at ", "."]);
        assert_eq!(Template::of("no number").numbers, Vec::<String>::new());
    }

    #[test]
    fn identical_warnings_make_one_line_naming_every_configuration() {
        let text = "other processes used 30 % of the machine's CPU time while it was measured";
        let lines = grouped_lines(&[w("A (openssl)", text), w("B (openssl)", text), w("C (rustls)", text)]);
        assert_eq!(
            lines,
            ["Warning: other processes used 30 % of the machine's CPU time while it was measured — 3 configurations: \
              A (openssl), B (openssl), C (rustls)"]
        );
    }

    #[test]
    fn warnings_differing_in_numbers_group_with_their_range_and_others_stay_apart() {
        let used = |p: &str| format!("other processes used {p} % of the machine's CPU time while it was measured");
        let stole = "the hypervisor stole 3 % of the CPU time";
        let lines = grouped_lines(&[
            w("A", &used("31")),
            w("B", stole),
            w("B", &used("9.5")),
            w("C", &used("34")),
            w("A", &used("31")),
        ]);
        assert_eq!(
            lines,
            [
                "Warning: other processes used 9.5–34 % of the machine's CPU time while it was measured — 3 \
                 configurations: A, B, C",
                "Warning: B: the hypervisor stole 3 % of the CPU time",
            ]
        );
    }

    #[test]
    fn a_long_group_names_the_first_configurations_and_counts_the_rest() {
        let ws: Vec<Warning> = (0..15).map(|i| w(&format!("c{i}"), "interrupted before its duration")).collect();
        let line = &grouped_lines(&ws)[0];
        assert!(line.starts_with("Warning: interrupted before its duration — 15 configurations: c0, c1,"), "{line}");
        assert!(line.ends_with(", c11 and 3 more"), "{line}");
    }
}
