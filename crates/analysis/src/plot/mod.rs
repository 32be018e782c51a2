//! `cargo xtask plot RUN_DIR` (also run at the end of every `run`): SVG
//! plots of a run directory, written to `RUN_DIR/plots/`:
//!
//! - `fill-cdf.svg`: buffer fill at wake-ups, CDF per configuration (from
//!   the player's histogram buckets, all trials pooled) — lost headroom
//!   shows as a curve moving left before anything underruns;
//! - `underrun-gaps.svg`: every underrun's gap, one strip per configuration;
//! - `hackbench-rounds.svg`: hackbench round times, CDF per configuration
//!   (only when the run had a load).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::results::{RunDir, RunWriter};

/// Arguments of `cargo xtask plot`.
#[derive(clap::Args, Debug)]
pub struct PlotArgs {
    /// The run directory.
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
}

/// `cargo xtask plot`.
pub fn run(args: &PlotArgs) -> Result<ExitCode> {
    let dir = match RunDir::load(&args.run_dir) {
        Ok(d) => d,
        Err(e) => {
            xrunbench_lab::say!(": {e}");
            return Ok(ExitCode::from(2));
        }
    };
    dir.name_unreadable();
    for p in write_all(&dir)? {
        println!("{}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes every plot that has data into the run directory's `plots/`;
/// returns their paths.
pub fn write_all(dir: &RunDir) -> Result<Vec<PathBuf>> {
    let out = RunWriter::at(&dir.path);
    let mut written = Vec::new();
    written.push(out.plot(FILL_CDF, &fill_cdf(dir)?)?);
    written.push(out.plot(GAPS, &gaps(dir)?)?);
    if let Some(svg) = rounds_cdf(dir)? {
        written.push(out.plot(ROUNDS_CDF, &svg)?);
    }
    Ok(written)
}

/// File names of the plots.
const FILL_CDF: &str = "fill-cdf.svg";
const GAPS: &str = "underrun-gaps.svg";
const ROUNDS_CDF: &str = "hackbench-rounds.svg";

/// Draws with `draw` on a fresh SVG canvas and returns the document
/// (rendered in memory, so that the file is written atomically).
fn svg(
    name: &str,
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<()>,
) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        draw(&root)?;
        root.present().map_err(err(name))?;
    }
    Ok(out)
}

/// Size of every plot, px.
const SIZE: (u32, u32) = (900, 560);

/// Distinct, colour-blind-friendly line colours (Okabe–Ito).
const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

fn err<E: std::fmt::Debug>(name: &str) -> impl Fn(E) -> anyhow::Error + '_ {
    move |e| anyhow!("{name}: drawing failed: {e:?}")
}

/// Cumulative fraction at each distinct value of a weighted sample, as a
/// step function starting at (first value, 0).
fn cdf(weighted: &BTreeMap<u64, u64>, scale: f64) -> Vec<(f64, f64)> {
    let total: u64 = weighted.values().sum();
    let mut pts = Vec::new();
    if total == 0 {
        return pts;
    }
    let mut acc = 0u64;
    for (&v, &c) in weighted {
        let x = v as f64 * scale;
        pts.push((x, acc as f64 / total as f64));
        acc += c;
        pts.push((x, acc as f64 / total as f64));
    }
    pts
}

/// One CDF per configuration on shared axes.
fn cdf_plot(
    name: &str,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<String> {
    svg(name, |root| {
        cdf_draw(root, name, title, x_desc, y_desc, series)
    })
}

fn cdf_draw(
    root: &DrawingArea<SVGBackend, Shift>,
    name: &str,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<()> {
    let e = err(name);
    let xmax = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.05;
    root.fill(&WHITE).map_err(&e)?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 24))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..xmax, 0f64..1.0)
        .map_err(&e)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(&e)?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(3)))
            .map_err(&e)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 17))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(&e)?;
    Ok(())
}

fn fill_cdf(dir: &RunDir) -> Result<String> {
    let series: Vec<(String, Vec<(f64, f64)>)> = dir
        .configs
        .iter()
        .map(|c| {
            let mut merged: BTreeMap<u64, u64> = BTreeMap::new();
            let mut wakeups = 0;
            for p in dir.trials_of(c).into_iter().filter_map(|t| t.measured()) {
                wakeups += p.fill.count;
                for [v, n] in &p.fill.buckets {
                    *merged.entry(*v).or_default() += n;
                }
            }
            (format!("{c} ({wakeups} wake-ups)"), cdf(&merged, 1e-3))
        })
        .collect();
    cdf_plot(
        FILL_CDF,
        &format!("{}: buffer fill at player wake-ups", dir.scenario),
        "buffer fill (ms of audio queued)",
        "fraction of wake-ups at or below",
        &series,
    )
}

/// The rounds' CDF; `None` when the run had no load.
fn rounds_cdf(dir: &RunDir) -> Result<Option<String>> {
    let series: Vec<(String, Vec<(f64, f64)>)> = dir
        .configs
        .iter()
        .filter_map(|c| {
            let mut merged: BTreeMap<u64, u64> = BTreeMap::new();
            for t in dir.trials_of(c) {
                // A kept round stands for the k rounds of its stretch.
                for l in t.load.iter() {
                    for &us in &l.rounds_us {
                        *merged.entry(us).or_default() += l.rounds_kept_every;
                    }
                }
            }
            let n: u64 = merged.values().sum();
            (n > 0).then(|| (format!("{c} ({n} rounds)"), cdf(&merged, 1e-3)))
        })
        .collect();
    if series.is_empty() {
        return Ok(None);
    }
    cdf_plot(
        ROUNDS_CDF,
        &format!("{}: hackbench round times", dir.scenario),
        "round time (ms)",
        "fraction of rounds at or below",
        &series,
    )
    .map(Some)
}

fn gaps(dir: &RunDir) -> Result<String> {
    svg(GAPS, |root| gaps_draw(root, dir))
}

fn gaps_draw(root: &DrawingArea<SVGBackend, Shift>, dir: &RunDir) -> Result<()> {
    let e = err(GAPS);
    let per: Vec<(String, Vec<f64>)> = dir
        .configs
        .iter()
        .map(|c| {
            let trials = dir.trials_of(c);
            let g: Vec<f64> = trials
                .iter()
                .filter_map(|t| t.measured())
                .flat_map(|p| p.events.iter().map(|u| u.gap_ms))
                .collect();
            (format!("{c}: {} in {} trials", g.len(), trials.len()), g)
        })
        .collect();
    let ymax = per
        .iter()
        .flat_map(|(_, g)| g.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.1;
    let n = per.len().max(1);
    root.fill(&WHITE).map_err(&e)?;
    let labels: Vec<String> = per.iter().map(|(l, _)| l.clone()).collect();
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{}: underrun gaps (one dot per underrun)", dir.scenario),
            ("sans-serif", 24),
        )
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..ymax)
        .map_err(&e)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        })
        .x_desc("configuration: underruns in trials")
        .y_desc("gap until sound restarted (ms)")
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(&e)?;
    for (i, (_, g)) in per.iter().enumerate() {
        let c = colour(i);
        // Deterministic jitter (golden-ratio sequence) spreads the dots
        // across the strip so equal gaps do not hide each other.
        chart
            .draw_series(g.iter().enumerate().map(|(j, &y)| {
                let jitter = ((j as f64 * 0.618_034) % 1.0 - 0.5) * 0.5;
                Circle::new((i as f64 + jitter, y), 3, c.mix(0.6).filled())
            }))
            .map_err(&e)?;
    }
    Ok(())
}
