//! The map kept true: docs/architecture.md's import rules, checked on the code. Every crate's
//! sources (`crates/*/src/**/*.rs`, `#[cfg(test)]` items left out) are parsed with syn; every
//! `use` line and every path (`crate::…`, `super::…`, `self::…`, `pqtls_<crate>::…`, and what a
//! crate root re-exports from one of its modules) is resolved to the module it names — its
//! crate and top-level module, e.g. `pqtls_net::measure`. Paths inside macro invocations
//! (`format!`, `matches!`) are not read.
//!
//! The rules (a failure names the rule and each offending `file:line`):
//! 1. **No measurement imports another's module.** A measurement's modules are listed in
//!    [`MEASUREMENTS`]; what two of them share goes to the lab (transports, key logs) or to a
//!    neutral network module, never into one of them.
//! 2. **What the measurements share imports no measurement's module**: the library code that is
//!    no measurement (the rest of pqtls-net, pqtls-peers, pqtls-lab, …) does not reach into one.
//!    The CLI is exempt: it is the front door that wires each kind to its measurement
//!    (`context::measurement_for`) and gives it its setup. Crate roots (`lib.rs`) only declare
//!    and re-export.
//! 3. **No CLI command module imports another** ([`CLI_COMMANDS`]); they share the modules of
//!    [`CLI_SHARED`] only. Every module of the CLI is in one of the two lists.

use proc_macro2::Span;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// A measurement and its modules (crate, top-level module: a file `src/<module>.rs` or a
/// directory `src/<module>/`). Update this list when a measurement moves.
struct Measurement {
    name: &'static str,
    modules: &'static [(&'static str, &'static str)],
}

const MEASUREMENTS: &[Measurement] = &[
    Measurement { name: "in situ", modules: &[("pqtls_lab", "insitu")] },
    Measurement { name: "load (and layers)", modules: &[("pqtls_net", "measure")] },
    Measurement { name: "transfer", modules: &[("pqtls_net", "transfer")] },
    Measurement { name: "resident", modules: &[("pqtls_net", "resident")] },
];

/// Known offenders of rules 1 and 2, (file, module imported): none since issue 33's carrier
/// moved what the network measurements share into `pqtls_net::shared`. An entry that no longer
/// offends fails the test, so the list cannot go stale.
const KNOWN_OFFENDERS: &[(&str, &str)] = &[];

/// The CLI's command modules (one per command or family of commands).
const CLI_COMMANDS: &[&str] = &[
    "assess",
    "batch",
    "experiments",
    "insitu",
    "layers",
    "list",
    "load",
    "netlab",
    "replicate",
    "resident",
    "serve",
    "transfer",
];

/// The CLI's shared modules: what the commands have in common (`count`: instruction counting
/// for the commands that measure in situ, not a command of its own).
const CLI_SHARED: &[&str] = &["context", "count", "factors", "flags", "output", "progress", "table"];

const CLI: &str = "pqtls_cli";

/// One source file: its crate (`pqtls_net`), its module path inside it (`["transport", "tcp"]`)
/// and the parsed syntax.
struct Source {
    path: String,
    krate: String,
    module: Vec<String>,
    file: syn::File,
}

impl Source {
    /// The top-level module the file belongs to (`None` for the crate root).
    fn top(&self) -> Option<&str> {
        self.module.first().map(String::as_str)
    }

    fn is_root(&self) -> bool {
        self.module.is_empty()
    }
}

/// A path found in a source file, and where.
struct Reference {
    segments: Vec<String>,
    line: usize,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn sources() -> Vec<Source> {
    let root = workspace();
    let mut out = Vec::new();
    let mut crates: Vec<PathBuf> =
        std::fs::read_dir(root.join("crates")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    crates.sort();
    for dir in crates {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let krate = dir.file_name().unwrap().to_string_lossy().replace('-', "_");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for f in files {
            let rel = f.strip_prefix(&src).unwrap();
            let mut module: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
            let last = module.pop().unwrap();
            let stem = last.trim_end_matches(".rs");
            // src/lib.rs, src/main.rs, src/x/mod.rs: the module is the directory's.
            if !(matches!(stem, "mod") || (module.is_empty() && matches!(stem, "lib" | "main"))) {
                module.push(stem.to_string());
            }
            // Binaries besides the crate's main (src/bin/…) are crate roots of their own.
            if module.first().is_some_and(|m| m == "bin") {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: cannot parse: {e}", f.display()));
            let path = f.strip_prefix(&root).unwrap().to_string_lossy().into_owned();
            out.push(Source { path, krate: krate.clone(), module, file });
        }
    }
    out
}

fn line(span: Span) -> usize {
    span.start().line
}

/// Whether an item is compiled for tests only (`#[cfg(test)]`, `#[cfg(all(test, …))]`).
fn test_only(item: &syn::Item) -> bool {
    use syn::Item::*;
    let attrs: &[syn::Attribute] = match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        Fn(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        Type(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    };
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().split(|c: char| !c.is_alphanumeric()).any(|w| w == "test"))
    })
}

/// Every `use` leaf and path of a file (outside test-only items).
#[derive(Default)]
struct Collector {
    references: Vec<Reference>,
    /// Public `use` leaves at the top of the file: (name it is known by, path).
    reexports: Vec<(String, Vec<String>)>,
    /// Names the file's top level defines.
    defined: BTreeSet<String>,
    depth: usize,
}

impl Collector {
    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>, public: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix, public);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.leaf(prefix, &n.ident, &n.ident, public),
            syn::UseTree::Rename(r) => self.leaf(prefix, &r.ident, &r.rename, public),
            syn::UseTree::Glob(g) => {
                self.references.push(Reference { segments: prefix.clone(), line: line(g.star_token.spans[0]) })
            }
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.use_tree(t, prefix, public)),
        }
    }

    fn leaf(&mut self, prefix: &[String], ident: &syn::Ident, known_as: &syn::Ident, public: bool) {
        let mut segments = prefix.to_vec();
        if ident != "self" {
            segments.push(ident.to_string());
        }
        if public && self.depth == 0 {
            let name =
                if known_as == "self" { prefix.last().cloned().unwrap_or_default() } else { known_as.to_string() };
            self.reexports.push((name, segments.clone()));
        }
        self.references.push(Reference { segments, line: line(ident.span()) });
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if test_only(item) {
            return;
        }
        if self.depth == 0 {
            let name = match item {
                syn::Item::Const(i) => Some(&i.ident),
                syn::Item::Enum(i) => Some(&i.ident),
                syn::Item::Fn(i) => Some(&i.sig.ident),
                syn::Item::Static(i) => Some(&i.ident),
                syn::Item::Struct(i) => Some(&i.ident),
                syn::Item::Trait(i) => Some(&i.ident),
                syn::Item::Type(i) => Some(&i.ident),
                syn::Item::Mod(i) => Some(&i.ident),
                _ => None,
            };
            if let Some(n) = name {
                self.defined.insert(n.to_string());
            }
        }
        if let syn::Item::Use(u) = item {
            let public = matches!(u.vis, syn::Visibility::Public(_));
            self.use_tree(&u.tree, &mut Vec::new(), public);
            return;
        }
        self.depth += 1;
        syn::visit::visit_item(self, item);
        self.depth -= 1;
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(first) = path.segments.first() {
            self.references.push(Reference { segments, line: line(first.ident.span()) });
        }
        syn::visit::visit_path(self, path);
    }
}

/// A file's references and its top-level definitions and re-exports.
struct Parsed {
    source: Source,
    collected: Collector,
}

/// Where a crate root's re-exported name comes from: (crate, name) → module, for names a
/// module of the crate defines itself (`pqtls_lab::Insitu` → `insitu`).
fn reexports(parsed: &[Parsed]) -> BTreeMap<(String, String), String> {
    let mut defined: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for p in parsed {
        if let Some(top) = p.source.top() {
            defined
                .entry((p.source.krate.clone(), top.to_string()))
                .or_default()
                .extend(p.collected.defined.iter().cloned());
        }
    }
    let mut out = BTreeMap::new();
    for p in parsed.iter().filter(|p| p.source.is_root()) {
        for (name, path) in &p.collected.reexports {
            let rest = match path.first().map(String::as_str) {
                Some("crate" | "self") => &path[1..],
                _ => &path[..],
            };
            if let (Some(module), Some(item)) = (rest.first(), rest.last()) {
                let k = (p.source.krate.clone(), module.clone());
                if defined.get(&k).is_some_and(|d| d.contains(item)) {
                    out.insert((p.source.krate.clone(), name.clone()), module.clone());
                }
            }
        }
    }
    out
}

/// The (crate, top-level module) a path names, if it names one of the workspace's modules.
fn resolve(r: &Reference, source: &Source, reexports: &BTreeMap<(String, String), String>) -> Option<(String, String)> {
    let (krate, rest): (String, Vec<String>) = match r.segments.first()?.as_str() {
        "crate" => (source.krate.clone(), r.segments[1..].to_vec()),
        "self" => (source.krate.clone(), [&source.module[..], &r.segments[1..]].concat()),
        "super" => {
            let supers = r.segments.iter().take_while(|s| *s == "super").count();
            let base = &source.module[..source.module.len().saturating_sub(supers)];
            (source.krate.clone(), [base, &r.segments[supers..]].concat())
        }
        s if s.starts_with("pqtls_") => (s.to_string(), r.segments[1..].to_vec()),
        _ => return None,
    };
    let first = rest.first()?;
    let module = reexports.get(&(krate.clone(), first.clone())).cloned().unwrap_or_else(|| first.clone());
    Some((krate, module))
}

fn measurement_of(krate: &str, module: &str) -> Option<&'static Measurement> {
    MEASUREMENTS.iter().find(|m| m.modules.iter().any(|(k, n)| *k == krate && *n == module))
}

const RULE_1: &str = "rule 1 (docs/architecture.md): no measurement imports another measurement's module";
const RULE_2: &str = "rule 2 (docs/architecture.md): what the measurements share imports no measurement's module";
const RULE_3: &str = "rule 3 (docs/architecture.md): no CLI command module imports another";

#[test]
fn the_architecture_rules_hold() {
    let parsed: Vec<Parsed> = sources()
        .into_iter()
        .map(|source| {
            let mut collected = Collector::default();
            collected.visit_file(&source.file);
            Parsed { source, collected }
        })
        .collect();
    let reexports = reexports(&parsed);
    let mut violations: BTreeMap<(&str, String, String), BTreeSet<usize>> = BTreeMap::new();
    let mut unclassified = Vec::new();
    for p in &parsed {
        let s = &p.source;
        let own = s.top().and_then(|t| measurement_of(&s.krate, t));
        let is_cli = s.krate == CLI;
        if is_cli && !s.is_root() {
            let top = s.top().unwrap();
            if !CLI_COMMANDS.contains(&top) && !CLI_SHARED.contains(&top) {
                unclassified.push(s.path.clone());
            }
        }
        for r in &p.collected.references {
            let Some((krate, module)) = resolve(r, s, &reexports) else { continue };
            let named = format!("{krate}::{module}");
            if let Some(theirs) = measurement_of(&krate, &module) {
                let rule = match own {
                    Some(m) if m.name == theirs.name => None,
                    Some(m) => Some((RULE_1, format!("{named} ({}), from {}", theirs.name, m.name))),
                    None if is_cli || s.is_root() => None,
                    None => Some((RULE_2, format!("{named} ({})", theirs.name))),
                };
                if let Some((rule, what)) = rule {
                    violations.entry((rule, s.path.clone(), what)).or_default().insert(r.line);
                }
            }
            if is_cli && krate == CLI {
                if let Some(top) = s.top().filter(|t| CLI_COMMANDS.contains(t)) {
                    if module != top && CLI_COMMANDS.contains(&module.as_str()) {
                        violations
                            .entry((RULE_3, s.path.clone(), format!("{named} (a command)")))
                            .or_default()
                            .insert(r.line);
                    }
                }
            }
        }
    }
    assert!(
        unclassified.is_empty(),
        "CLI modules in neither CLI_COMMANDS nor CLI_SHARED (crates/pqtls-cli/tests/architecture.rs): {unclassified:?}; \
         add each to the list it belongs to (and to docs/architecture.md)"
    );
    let mut used = BTreeSet::new();
    let mut report = Vec::new();
    for ((rule, file, what), lines) in &violations {
        let known = KNOWN_OFFENDERS
            .iter()
            .position(|(f, m)| f == file && what.starts_with(&format!("{m} ")) && *rule != RULE_3);
        if let Some(i) = known {
            used.insert(i);
            continue;
        }
        for l in lines {
            report.push(format!("{rule}:\n  {file}:{l} uses {what}"));
        }
    }
    let stale: Vec<String> = KNOWN_OFFENDERS
        .iter()
        .enumerate()
        .filter(|(i, _)| !used.contains(i))
        .map(|(_, (f, m))| format!("{f} → {m}"))
        .collect();
    assert!(
        report.is_empty(),
        "the architecture's import rules are broken ({} places):\n{}",
        report.len(),
        report.join("\n")
    );
    assert!(
        stale.is_empty(),
        "KNOWN_OFFENDERS (crates/pqtls-cli/tests/architecture.rs) lists imports that no longer offend: remove {stale:?}"
    );
}

/// The rules are read from the code as it is written: a command importing another (through
/// `crate::`, `super::` or a `use` group) is found; a test module's imports are not read.
#[test]
fn a_command_importing_another_is_found_and_named() {
    let text = "use crate::{context, load::LoadArgs};\nfn f() { crate::transfer::run(); super::table::draw(); }\n\
                #[cfg(test)]\nmod tests { use crate::insitu::x; }\n";
    let source = Source {
        path: "crates/pqtls-cli/src/assess.rs".into(),
        krate: CLI.into(),
        module: vec!["assess".into()],
        file: syn::parse_file(text).unwrap(),
    };
    let mut c = Collector::default();
    c.visit_file(&source.file);
    let named: Vec<(String, usize)> =
        c.references.iter().filter_map(|r| resolve(r, &source, &BTreeMap::new()).map(|(_, m)| (m, r.line))).collect();
    assert_eq!(
        named,
        [("context".to_string(), 1), ("load".into(), 1), ("transfer".into(), 2), ("table".into(), 2)],
        "{named:?}"
    );
}
