//! `cargo xtask compare RUN_DIR [RUN_DIR…]`: the comparison table of one
//! or more run directories — configurations as columns, the first the
//! baseline — in mmtests' shape, with a significance mark on the mean row.
//!
//! Data ([`table::Table`]) is kept apart from text: each output format is a
//! small [`export::Exporter`].

pub mod export;
pub mod metrics;
pub mod sections;
pub mod table;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

use self::export::{exporter, Format};
use self::metrics::Metric;
use self::table::{Column, Footer, Samples, Significance, Table};
use crate::results::{LoadError, RunDir, RunWriter};

/// Exit code for unreadable input (a run directory, a trial file).
const EXIT_BAD_INPUT: u8 = 2;

/// The significance level of every test.
pub const ALPHA: f64 = 0.05;

/// Arguments of `cargo xtask compare`.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Run directories (results/<scenario>/<timestamp>[-<label>]); the
    /// first configuration of the first is the baseline.
    #[arg(required = true, value_name = "RUN_DIR")]
    pub run_dirs: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Test behind the `*…*` mark on the Amean row.
    #[arg(long, value_enum, default_value_t = Significance::Mwu)]
    pub significance: Significance,
}

/// `cargo xtask compare`.
pub fn run(args: &CompareArgs) -> Result<ExitCode> {
    let dirs = match load_all(&args.run_dirs) {
        Ok(d) => d,
        Err(e) => {
            xrunbench_lab::say!(": {e}");
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        }
    };
    // A trial that does not read is left out of the table, and named.
    dirs.iter().for_each(RunDir::name_unreadable);
    let table = build(&dirs, args.significance, ALPHA);
    print!("{}", export::exporter(args.format).render(&table));
    Ok(ExitCode::SUCCESS)
}

/// Reads every run directory, stopping at the first bad one.
pub fn load_all(paths: &[PathBuf]) -> Result<Vec<RunDir>, LoadError> {
    paths.iter().map(|p| RunDir::load(p)).collect()
}

/// Builds the table of one or more run directories.
pub fn build(dirs: &[RunDir], kind: Significance, alpha: f64) -> Table {
    let merged = dirs.len() > 1;
    let mut columns = Vec::new();
    let mut samples: Samples = Vec::new();
    let mut sections = sections::Sections::default();
    for d in dirs {
        for config in &d.configs {
            let trials = d.trials_of(config);
            let kernels = distinct(trials.iter().map(|t| Some(&t.machine.kernel_release)));
            let preempt = distinct(trials.iter().map(|t| t.machine.preempt.as_ref()));
            let name = if merged {
                format!("{}/{config}", d.label)
            } else {
                config.clone()
            };
            sections::of_column(&name, &trials, &mut sections);
            columns.push(Column {
                name,
                group: merged.then(|| d.label.clone()),
                config: config.clone(),
                n: trials.len(),
                kernels,
                preempt,
            });
            samples.push(
                Metric::ALL
                    .iter()
                    .map(|&m| (m, trials.iter().filter_map(|t| m.of(t)).collect()))
                    .collect(),
            );
        }
    }
    let rows = table::build_rows(&samples, kind, alpha);
    Table {
        columns,
        rows,
        footer: footer(dirs, kind, alpha),
        sections,
    }
}

/// After the trials: prints the comparison table and writes it in every
/// format (`comparison.txt`, `.md`, `.csv`, `.json`) and the plots into
/// the run directory. The trials are already safe; an error here is
/// reported after the run's outcome.
pub fn write_comparison_and_plots(out: &RunWriter, dir: &RunDir) -> Result<()> {
    let table = build(std::slice::from_ref(dir), Significance::Mwu, ALPHA);
    println!();
    print!("{}", exporter(Format::Text).render(&table));
    for format in Format::ALL {
        out.comparison(format.extension(), &exporter(format).render(&table))
            .context("comparison not written")?;
    }
    crate::plot::write_all(dir).context("plots not written")?;
    Ok(())
}

/// The values there are, sorted, each once.
fn distinct<'a>(values: impl Iterator<Item = Option<&'a String>>) -> Vec<String> {
    let mut out: Vec<String> = values.flatten().cloned().collect();
    out.sort();
    out.dedup();
    out
}

fn footer(dirs: &[RunDir], kind: Significance, alpha: f64) -> Footer {
    fn uniq<T: PartialEq>(v: impl Iterator<Item = T>) -> Vec<T> {
        let mut out: Vec<T> = Vec::new();
        for x in v {
            if !out.contains(&x) {
                out.push(x);
            }
        }
        out
    }
    Footer {
        scenarios: uniq(dirs.iter().map(|d| d.scenario.clone())),
        trial_seconds: uniq(dirs.iter().map(|d| d.trial_seconds)),
        sinks: uniq(dirs.iter().flat_map(RunDir::sinks)),
        machines: uniq(dirs.iter().filter_map(|d| d.machine.clone())),
        significance: kind,
        alpha,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testing::{manifest, trial, write_run};

    #[test]
    fn a_run_with_one_bad_trial_compares_its_good_ones() {
        let root = tempfile::tempdir().unwrap();
        let good = [trial("a", 1, |_| {}), trial("a", 2, |_| {})];
        let dir = write_run(root.path(), &manifest(&["a"]), &good);
        let bad = trial("a", 3, |v| {
            v["player"]["audio_seconds"] = serde_json::json!(-1)
        });
        let text = serde_json::to_string(&bad).unwrap();
        std::fs::write(dir.join("trials/a-3.json"), text).unwrap();
        let args = CompareArgs {
            run_dirs: vec![dir.clone()],
            format: Format::Text,
            significance: Significance::Mwu,
        };
        assert_eq!(
            format!("{:?}", run(&args).unwrap()),
            format!("{:?}", ExitCode::SUCCESS)
        );
        let dirs = load_all(&[dir]).unwrap();
        assert_eq!(dirs[0].records, good);
        let [why] = &dirs[0].unreadable[..] else {
            panic!("{:?}", dirs[0].unreadable)
        };
        assert!(why.contains("a-3.json: player.audio_seconds = -1"), "{why}");
    }
}
