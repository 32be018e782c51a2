//! What a bisected tree may not change: a bisection checks out commits
//! nobody has read yet, and its scenario may live in that tree. Whatever in
//! the scenario runs commands on the host (`deploy`, `expect_kernel`,
//! `power_cycle`) or chooses where and how the host connects (the board,
//! its ssh options — `ProxyCommand` runs a command too —, identity and
//! known hosts) is taken as it was when the bisection started: from the
//! command line, or the scenario as read then. A commit whose scenario
//! changes any of it is refused (skipped), and nothing of it runs.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::deploy::DeployArgs;
use crate::run::scenario::Scenario;

/// The host-facing part of a scenario, as a step would use it (the
/// command line's deploy options over the scenario's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostHooks {
    /// The board: destination, port, identity, known hosts.
    pub board: Option<Vec<String>>,
    /// The scenario's ssh options.
    pub ssh_options: Vec<String>,
    /// `power_cycle`.
    pub power_cycle: Option<String>,
    /// `deploy` (`--deploy` over it).
    pub deploy: Option<String>,
    /// `expect_kernel` (`--expect-kernel` over it).
    pub expect_kernel: Option<String>,
}

impl HostHooks {
    /// The hooks `s` (target options already applied) would run with
    /// `args`.
    pub fn of(s: &Scenario, args: &DeployArgs) -> HostHooks {
        let t = s.target.as_ref();
        HostHooks {
            board: t.map(|t| {
                vec![
                    t.destination.clone(),
                    t.port.map(|p| p.to_string()).unwrap_or_default(),
                    t.identity
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    t.known_hosts
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                ]
            }),
            ssh_options: t.map(|t| t.options.clone()).unwrap_or_default(),
            power_cycle: t.and_then(|t| t.power_cycle.clone()),
            deploy: args
                .deploy
                .clone()
                .or_else(|| t.and_then(|t| t.deploy.clone())),
            expect_kernel: args
                .expect_kernel
                .clone()
                .or_else(|| t.and_then(|t| t.expect_kernel.clone())),
        }
    }

    /// The names of what differs from `trusted`.
    pub fn differences(&self, trusted: &HostHooks) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.board != trusted.board {
            out.push("the board (destination, port, identity, known_hosts)");
        }
        if self.ssh_options != trusted.ssh_options {
            out.push("ssh options");
        }
        if self.power_cycle != trusted.power_cycle {
            out.push("power_cycle");
        }
        if self.deploy != trusted.deploy {
            out.push("deploy");
        }
        if self.expect_kernel != trusted.expect_kernel {
            out.push("expect_kernel");
        }
        out
    }

    /// Refuses `self` unless it is `trusted`: one line saying what the
    /// commit's scenario changed.
    pub fn check(&self, trusted: &HostHooks, scenario: &Path) -> Result<(), String> {
        let differ = self.differences(trusted);
        if differ.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{}: at this commit the scenario changes {} from what the bisection started with: \
             refused, nothing of it runs (what runs on the host comes from the command line or \
             the scenario as read at the start)",
            scenario.display(),
            differ.join(", ")
        ))
    }

    /// Reads hooks written by [`HostHooks::write`].
    pub fn read(path: &Path) -> Result<HostHooks, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: {}",
                path.display(),
                xrunbench_schema::doc::one_line(&e.to_string())
            )
        })
    }

    /// Writes these hooks to `path` (atomically).
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        xrunbench_schema::doc::write_atomic(path, text.as_bytes())?;
        Ok(())
    }
}
