//! LAVA: `cargo xtask lava SCENARIO --out DIR` writes a test definition
//! (and a job for a board reached over SSH) that runs the scenario's
//! trials on a board with no host in the loop ([`definition`]);
//! `cargo xtask lava-results LOG|DIR` turns what such a job logged back
//! into a run directory ([`results`]); `cargo xtask run --lava URL` runs
//! a scenario as jobs of a LAVA server ([`submit`], through [`server`]).

pub mod definition;
pub mod results;
pub mod server;
pub mod submit;
mod yaml;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

use xrunbench_scenario as scenario;

/// Exit code for bad input.
const EXIT_BAD_INPUT: u8 = 2;

/// Arguments of `cargo xtask lava`.
#[derive(clap::Args, Debug)]
pub struct LavaArgs {
    /// The scenario file.
    pub scenario: PathBuf,
    /// Where to write `<name>.yaml` (the test definition) and
    /// `<name>-job.yaml` (a job for a board reached over SSH).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Where the board downloads its binaries: URL/<arch>/xrun-trial (the
    /// layout of `cargo xtask board build --out DIR`); without it the
    /// definition's XRUNBENCH_BIN_DIR or PATH must have them.
    #[arg(long, value_name = "URL")]
    pub binaries_url: Option<String>,
    /// The shell prompt (a regex) the job's ssh boot waits for.
    #[arg(long, value_name = "REGEX", default_value = "root@")]
    pub prompt: String,
}

/// `cargo xtask lava`.
pub fn run(args: &LavaArgs) -> Result<ExitCode> {
    let (file, s) = match scenario::load(&args.scenario) {
        Ok(v) => v,
        Err(e) => return Ok(bad_input(&e.0)),
    };
    let gates = match xrunbench_analysis::gate::resolve(&args.scenario, &file, &s) {
        Ok(g) => g,
        Err(e) => return Ok(bad_input(&e.0)),
    };
    if let Some(url) = &args.binaries_url {
        if url
            .chars()
            .any(|c| c.is_whitespace() || c == '\'' || c == '"')
        {
            return Ok(bad_input(&format!(
                "--binaries-url `{url}`: expected a URL without blanks or quotes"
            )));
        }
    }
    let opts = definition::Options {
        binaries_url: args
            .binaries_url
            .as_deref()
            .map(|u| u.trim_end_matches('/')),
        prompt: &args.prompt,
    };
    let g = match definition::generate(&file, &s, &gates, &opts) {
        Ok(g) => g,
        Err(e) => return Ok(bad_input(&e)),
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let def_path = args.out.join(format!("{}.yaml", g.name));
    let job_path = args.out.join(format!("{}-job.yaml", g.name));
    for (path, text) in [(&def_path, &g.definition), (&job_path, &g.job)] {
        xrunbench_schema::doc::write_atomic(path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let host_side = gates
        .iter()
        .filter(|g| matches!(g, xrunbench_analysis::gate::Gate::NotWorse { .. }))
        .count();
    println!("test definition: {}", def_path.display());
    println!("job (ssh board): {}", job_path.display());
    println!(
        "{} trial(s); {} gate(s) judged on the board{}",
        g.trials,
        gates.len() - host_side,
        if host_side > 0 {
            format!(
                ", {host_side} against the baseline judged by `{} lava-results`",
                xrunbench_lab::util::invocation()
            )
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

fn bad_input(line: &str) -> ExitCode {
    xrunbench_lab::say!(": {line}");
    ExitCode::from(EXIT_BAD_INPUT)
}
