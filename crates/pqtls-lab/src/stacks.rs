//! What every measurement starts from: the TLS stacks this build has, the PKI that makes
//! their certificates, and the environment every record carries. In situ, load, layers and
//! transfer all take one [`Stacks`] and prepare a scenario's contexts through it.

use pqtls_core::backend::{Backend, ClientTrust, PkiFiles, Prepared};
use pqtls_core::catalogue::Stack;
use pqtls_core::config::HandshakeConfig;
use pqtls_core::record::Env;
use pqtls_core::scenario::Scenario;
use pqtls_core::{Error, Result};
use std::sync::Arc;

/// Certificates for a handshake configuration (the PKI, supplied by the caller).
pub type PkiFn<'a> = dyn Fn(&HandshakeConfig) -> Result<PkiFiles> + Sync + 'a;

/// The measurement context: stacks, PKI, environment.
pub struct Stacks<'a> {
    /// The stacks this build has.
    pub backends: &'a [Box<dyn Backend>],
    pub pki: &'a PkiFn<'a>,
    /// Versions, CPU, kernel: what every record says about how it was obtained.
    pub env: Env,
}

impl<'a> Stacks<'a> {
    pub fn new(backends: &'a [Box<dyn Backend>], pki: &'a PkiFn<'a>, env: Env) -> Stacks<'a> {
        Stacks { backends, pki, env }
    }

    /// The stacks built in.
    pub fn stacks(&self) -> Vec<Stack> {
        self.backends.iter().map(|b| b.stack()).collect()
    }

    /// The backend of `stack`, or an error naming the ones built in.
    pub fn backend(&self, stack: Stack) -> Result<&'a dyn Backend> {
        self.backends.iter().find(|b| b.stack() == stack).map(|b| b.as_ref()).ok_or_else(|| {
            Error::Unsupported(format!(
                "this build has no {stack} backend; stacks built in: {}",
                self.backends.iter().map(|b| b.stack().name()).collect::<Vec<_>>().join(", ")
            ))
        })
    }

    /// Contexts ready to make endpoints for a scenario, and the PKI files they were made from
    /// (the client trusting the PKI's root; the scenario's `verify` factor says whether it
    /// verifies the chain).
    pub fn prepare(&self, scenario: &Scenario) -> Result<(Arc<dyn Prepared>, PkiFiles)> {
        self.prepare_trusting(scenario, &ClientTrust::default())
    }

    /// [`Stacks::prepare`] with the client trusting `trust`'s anchors and checking its name (a
    /// server whose chain pqtls did not make: `pqtls load --ca`); the scenario's `verify`
    /// factor still says whether the chain is verified.
    pub fn prepare_trusting(&self, scenario: &Scenario, trust: &ClientTrust) -> Result<(Arc<dyn Prepared>, PkiFiles)> {
        let cfg = &scenario.handshake;
        let mut files = (self.pki)(cfg)?;
        files.trust = ClientTrust { verify: scenario.load.verify, ..trust.clone() };
        Ok((Arc::from(self.backend(cfg.stack)?.prepare(cfg, &files)?), files))
    }

    /// [`Stacks::prepare`] for a handshake configuration alone (`pqtls serve`).
    pub fn prepare_config(&self, cfg: &HandshakeConfig) -> Result<(Arc<dyn Prepared>, PkiFiles)> {
        let files = (self.pki)(cfg)?;
        Ok((Arc::from(self.backend(cfg.stack)?.prepare(cfg, &files)?), files))
    }
}
