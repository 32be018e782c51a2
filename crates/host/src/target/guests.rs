//! Several VM-lab guests as one target: a run whose configurations boot
//! other kernels or command lines keeps one guest booted per distinct
//! kernel and command line, runs trials on one at a time and keeps the
//! others frozen (QEMU's `stop`: no CPU taken, their clocks still). Trials
//! still interleave across configurations; a switch closes the link to
//! the guest that stops, freezes it, thaws the next and reconnects to it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use xrunbench_trial::child::cpu_time;

use anyhow::{anyhow, Result};
use xrunbench_schema::probe::{CheckReport, Probe, CHECK_SCHEMA};
use xrunbench_schema::trial::{AudioInput, TrialSpec};

use super::run::{Target, TrialClock, TrialRun, Unreachable};
use super::ssh::Ssh;

/// The guests of one run.
pub struct Guests {
    inner: RefCell<Inner>,
    /// Which guest each configuration runs on (by name).
    of_config: BTreeMap<String, usize>,
}

struct Inner {
    boards: Vec<Ssh>,
    /// The one running; the others are frozen.
    active: usize,
    /// Each WAV put on the guests: its path on each, in guest order.
    staged: Vec<Vec<PathBuf>>,
    /// What the frozen guests' QEMUs took while trials ran.
    frozen: FrozenCost,
}

/// The CPU time frozen guests took while trials ran on another: what
/// freezing promises is nothing, and the run says what it was.
#[derive(Default)]
struct FrozenCost {
    trials: u32,
    /// Wall-clock time of the trials, times the guests frozen meanwhile.
    frozen_time: Duration,
    /// Their QEMUs' CPU time meanwhile.
    cpu: Duration,
}

impl FrozenCost {
    fn line(&self) -> Option<String> {
        if self.trials == 0 || self.frozen_time.is_zero() {
            return None;
        }
        Some(format!(
            "frozen guests took {:.2} CPU-s in {:.1} s frozen during {} trial(s) ({:.2} % of a CPU)",
            self.cpu.as_secs_f64(),
            self.frozen_time.as_secs_f64(),
            self.trials,
            100.0 * self.cpu.as_secs_f64() / self.frozen_time.as_secs_f64()
        ))
    }
}

impl Guests {
    /// `boards` (the first running, the others frozen with
    /// [`Ssh::pause`]) and the guest each configuration runs on.
    pub fn new(boards: Vec<Ssh>, of_config: BTreeMap<String, usize>) -> Guests {
        Guests {
            inner: RefCell::new(Inner {
                boards,
                active: 0,
                staged: Vec::new(),
                frozen: FrozenCost::default(),
            }),
            of_config,
        }
    }

    fn board_of(&self, config: &str) -> usize {
        self.of_config.get(config).copied().unwrap_or(0)
    }

    /// Guest `to` running and reachable, the one before it frozen.
    fn switch(&self, to: usize) -> Result<(), Unreachable> {
        let mut inner = self.inner.borrow_mut();
        let from = inner.active;
        if from == to {
            return Ok(());
        }
        let paused = inner.boards[from].pause();
        if let Err(e) = paused {
            return Err(Unreachable(format!(
                "freezing {}: {e:#}",
                inner.boards[from].describe()
            )));
        }
        inner.active = to;
        inner.boards[to].resume()
    }

    /// Runs `f` on the running guest.
    fn on_active<T>(&self, f: impl FnOnce(&Ssh) -> T) -> T {
        let inner = self.inner.borrow();
        f(&inner.boards[inner.active])
    }

    /// Runs `f` on every guest in turn, each running while it does; ends
    /// with the guest that ran before.
    fn on_each<T>(&self, mut f: impl FnMut(usize, &mut Ssh) -> Result<T>) -> Result<Vec<T>> {
        let back = self.inner.borrow().active;
        let count = self.inner.borrow().boards.len();
        let mut out = Vec::new();
        for i in 0..count {
            self.switch(i).map_err(|e| anyhow!(e.0))?;
            let mut inner = self.inner.borrow_mut();
            out.push(f(i, &mut inner.boards[i])?);
        }
        self.switch(back).map_err(|e| anyhow!(e.0))?;
        Ok(out)
    }

    /// `spec` with its WAV path the running guest's.
    fn for_active(&self, spec: &TrialSpec) -> TrialSpec {
        let inner = self.inner.borrow();
        let mut spec = spec.clone();
        if let AudioInput::File(path) = &mut spec.audio {
            if let Some(paths) = inner.staged.iter().find(|p| p.first() == Some(path)) {
                *path = paths[inner.active].clone();
            }
        }
        spec
    }
}

impl Target for Guests {
    fn describe(&self) -> String {
        let inner = self.inner.borrow();
        let each: Vec<String> = inner.boards.iter().map(|b| b.describe()).collect();
        format!(
            "{} guests, one running at a time: {}",
            each.len(),
            each.join("; ")
        )
    }

    fn xrun_trial(&self, args: &[&str]) -> Command {
        self.on_active(|b| b.xrun_trial(args))
    }

    fn stage_audio(&mut self, host_path: &Path, probe: &Probe) -> Result<PathBuf> {
        let paths = self.on_each(|_, b| b.stage_audio(host_path, probe))?;
        let first = paths[0].clone();
        self.inner.borrow_mut().staged.push(paths);
        Ok(first)
    }

    fn work_dir(&self, run_dir: &Path) -> Option<PathBuf> {
        self.on_active(|b| b.work_dir(run_dir))
    }

    fn trial_command(&self) -> Command {
        self.on_active(|b| b.trial_command())
    }

    fn spawned_trial_pid(&self, spawned: u32) -> Option<u32> {
        self.on_active(|b| b.spawned_trial_pid(spawned))
    }

    fn trial_timeout(&self) -> Option<Duration> {
        self.on_active(|b| b.trial_timeout())
    }

    fn trial_clock(&self) -> TrialClock {
        self.on_active(|b| b.trial_clock())
    }

    fn signal_trial(&self, pid: u32, hard: bool) {
        self.on_active(|b| b.signal_trial(pid, hard))
    }

    fn drop_link(&self) {
        self.on_active(|b| b.drop_link())
    }

    fn link_note(&self) -> Option<String> {
        self.on_active(|b| b.link_note())
    }

    fn retries(&self) -> u32 {
        self.on_active(|b| b.retries())
    }

    fn keep_logs_in(&mut self, dir: &Path) {
        for b in &mut self.inner.borrow_mut().boards {
            b.keep_logs_in(dir);
        }
    }

    fn recover(&mut self, orphan: Option<u32>) -> Result<Vec<String>, Unreachable> {
        let mut inner = self.inner.borrow_mut();
        let active = inner.active;
        inner.boards[active].recover(orphan)
    }

    fn finish(&mut self) -> Vec<String> {
        let mut inner = self.inner.borrow_mut();
        let mut lines: Vec<String> = inner.frozen.line().into_iter().collect();
        inner.frozen = FrozenCost::default();
        let staged = !inner.staged.is_empty();
        let active = inner.active;
        for (i, b) in inner.boards.iter_mut().enumerate() {
            // A frozen guest cannot answer: it runs again only to have its
            // staged files removed (its tmpfs goes with it otherwise).
            if staged && i != active {
                if let Err(e) = b.resume() {
                    lines.push(e.0);
                }
            }
            lines.extend(b.finish());
        }
        lines
    }

    fn select(&mut self, config: &str) -> Result<(), Unreachable> {
        self.switch(self.board_of(config))
    }

    fn unknown_parameters(&self) -> Result<Vec<String>> {
        self.on_active(|b| b.unknown_parameters())
    }

    fn check(&self, specs: &[TrialSpec], read_only: bool) -> Result<CheckReport> {
        let reports = self.on_each(|i, b| {
            let mine: Vec<TrialSpec> = specs
                .iter()
                .filter(|s| self.board_of(&s.trial.config) == i)
                .cloned()
                .collect();
            if mine.is_empty() {
                return Ok(None);
            }
            b.check(&mine, read_only).map(Some)
        })?;
        let mut all = CheckReport {
            schema: CHECK_SCHEMA.into(),
            problems: Vec::new(),
            knobs: Vec::new(),
        };
        for r in reports.into_iter().flatten() {
            all.problems.extend(r.problems);
            all.knobs.extend(r.knobs);
        }
        Ok(all)
    }

    fn restore(&self) -> Result<(bool, Vec<String>)> {
        let each = self.on_each(|_, b| b.restore())?;
        let ok = each.iter().all(|(ok, _)| *ok);
        Ok((ok, each.into_iter().flat_map(|(_, l)| l).collect()))
    }

    fn run_trial(
        &self,
        spec: &TrialSpec,
        progress: &mut dyn FnMut(&str),
        stop: &dyn Fn() -> bool,
    ) -> TrialRun {
        if let Err(e) = self.switch(self.board_of(&spec.trial.config)) {
            return TrialRun::Lost {
                reason: e.0,
                pid: None,
            };
        }
        let spec = self.for_active(spec);
        let frozen: Vec<u32> = {
            let inner = self.inner.borrow();
            (inner.boards.iter().enumerate())
                .filter(|(i, _)| *i != inner.active)
                .filter_map(|(_, b)| b.lab_pid())
                .collect()
        };
        let cpu = || -> Duration { frozen.iter().filter_map(|p| cpu_time(*p)).sum() };
        let (began, cpu_before) = (Instant::now(), cpu());
        let run = self.on_active(|b| b.run_trial(&spec, progress, stop));
        let cost = &mut self.inner.borrow_mut().frozen;
        cost.trials += 1;
        cost.frozen_time += began.elapsed() * frozen.len() as u32;
        cost.cpu += cpu().saturating_sub(cpu_before);
        run
    }
}
