//! Scenario files written for a test: the runner's and the `xrunbench`
//! binary's tests read the same ones.

use std::path::{Path, PathBuf};

/// Writes `body` as `<dir>/<name>.toml`.
pub fn scenario(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, body).unwrap();
    p
}

/// A TOML basic string: `s` quoted and escaped, for paths and names put
/// into a scenario's text.
pub use crate::testboard::toml_string;

/// A scenario file's text, built for a test: the layout every test writes
/// the same way (top-level keys, `[audio]`, `[load]`, the configurations,
/// then any tables of the test's own), so that a test states only what it
/// is about.
///
/// ```
/// use xrunbench_test_support::scenarios::ScenarioText;
/// let text = ScenarioText::virtual_sink("a").trials(2).config("x").text();
/// assert!(text.starts_with("name = \"a\"\ntrials = 2\n"));
/// ```
#[derive(Clone, Debug)]
pub struct ScenarioText {
    name: String,
    top: Vec<(String, String)>,
    audio: Vec<(String, String)>,
    load: Option<String>,
    configs: Vec<String>,
    tail: String,
}

impl ScenarioText {
    /// A scenario named `name` with nothing else: no trials, duration or
    /// warmup (the runner's defaults), `[audio]` empty.
    pub fn new(name: &str) -> Self {
        ScenarioText {
            name: name.to_string(),
            top: Vec::new(),
            audio: Vec::new(),
            load: None,
            configs: Vec::new(),
            tail: String::new(),
        }
    }

    /// The suite's usual scenario: one 1 s trial, no warmup, a generated
    /// 1 s tone (8 kHz mono, so that it costs nothing) on the `virtual`
    /// sink, whose timing is exact on any machine. No configuration yet.
    pub fn virtual_sink(name: &str) -> Self {
        Self::new(name)
            .trials(1)
            .duration("1s")
            .warmup("0s")
            .generate("{ seconds = 1, rate = 8000, channels = 1 }")
            .audio("backend", "virtual")
    }

    /// Two configurations × two 1 s trials on the virtual sink under a
    /// small hackbench load: `plain`, and `nice` whose player runs at
    /// `priority` (`other:5`…) — a table with two columns and every row.
    pub fn plain_and_nice(name: &str, priority: &str) -> Self {
        Self::virtual_sink(name)
            .trials(2)
            .warmup("200ms")
            .audio("buffer_time", "40ms")
            .hackbench("{ groups = 1, fds = 2, loops = 20 }")
            .config("plain")
            .config_with(
                "nice",
                &format!("[config.audio]\npriority = {}", toml_string(priority)),
            )
    }

    /// Sets a top-level key to a raw TOML value (replacing it if set).
    pub fn top(mut self, key: &str, raw: &str) -> Self {
        set(&mut self.top, key, raw.to_string());
        self
    }

    /// `trials = n`.
    pub fn trials(self, n: u32) -> Self {
        self.top("trials", &n.to_string())
    }

    /// `duration = "d"`.
    pub fn duration(self, d: &str) -> Self {
        self.top("duration", &toml_string(d))
    }

    /// `warmup = "w"`.
    pub fn warmup(self, w: &str) -> Self {
        self.top("warmup", &toml_string(w))
    }

    /// `[audio]`'s `generate` (a raw inline table: `{ seconds = 1 }`).
    pub fn generate(mut self, raw: &str) -> Self {
        set(&mut self.audio, "generate", raw.to_string());
        self
    }

    /// Sets an `[audio]` key to a string (`backend`, `device`,
    /// `buffer_time`, `priority`…), replacing it if set.
    pub fn audio(mut self, key: &str, value: &str) -> Self {
        set(&mut self.audio, key, toml_string(value));
        self
    }

    /// `[load]` with `hackbench = raw` (a raw inline table).
    pub fn hackbench(mut self, raw: &str) -> Self {
        self.load = Some(format!("hackbench = {raw}"));
        self
    }

    /// `[load]`'s `start_delay`: the load starts this long after the
    /// player (after [`hackbench`](Self::hackbench), which sets `[load]`).
    pub fn load_start_delay(mut self, delay: &str) -> Self {
        let load = self
            .load
            .as_mut()
            .expect("load_start_delay after hackbench: it adds to [load]");
        load.push_str(&format!("\nstart_delay = {}", toml_string(delay)));
        self
    }

    /// A configuration named `name` with no knobs.
    pub fn config(self, name: &str) -> Self {
        self.config_with(name, "")
    }

    /// A configuration named `name` followed by raw TOML `lines` (its
    /// knobs, `[config.audio]`…).
    pub fn config_with(mut self, name: &str, lines: &str) -> Self {
        let mut c = format!("[[config]]\nname = {}\n", toml_string(name));
        if !lines.is_empty() {
            c.push_str(lines);
            if !lines.ends_with('\n') {
                c.push('\n');
            }
        }
        self.configs.push(c);
        self
    }

    /// Raw TOML after the configurations: `[target]`, `[gate.*]`.
    pub fn tail(mut self, raw: &str) -> Self {
        self.tail.push_str(raw);
        if !raw.is_empty() && !raw.ends_with('\n') {
            self.tail.push('\n');
        }
        self
    }

    /// The scenario's text.
    pub fn text(&self) -> String {
        let mut out = format!("name = {}\n", toml_string(&self.name));
        for (k, v) in &self.top {
            out.push_str(&format!("{k} = {v}\n"));
        }
        out.push_str("[audio]\n");
        for (k, v) in &self.audio {
            out.push_str(&format!("{k} = {v}\n"));
        }
        if let Some(load) = &self.load {
            out.push_str(&format!("[load]\n{load}\n"));
        }
        for c in &self.configs {
            out.push_str(c);
        }
        out.push_str(&self.tail);
        out
    }

    /// Writes the text as `<dir>/<name>.toml`; its path.
    pub fn write(&self, dir: &Path) -> PathBuf {
        scenario(dir, &self.name, &self.text())
    }
}

fn set(list: &mut Vec<(String, String)>, key: &str, value: String) {
    match list.iter_mut().find(|(k, _)| k == key) {
        Some(entry) => entry.1 = value,
        None => list.push((key.to_string(), value)),
    }
}

/// The smallest scenario that runs: one 1 s trial of one configuration
/// on the virtual sink, named `name`, written into `dir`.
pub fn one_trial_scenario(dir: &Path, name: &str) -> PathBuf {
    ScenarioText::virtual_sink(name).config("a").write(dir)
}

/// What [`run_one_trial_here`] left: the directory it ran in, the trial
/// records found under its `results/<name>/`, and the run's output.
pub struct RunHere {
    /// The directory the run was started from (removed on drop).
    pub dir: tempfile::TempDir,
    /// `a-1.json` files under `dir/results/<name>/`.
    pub records: Vec<PathBuf>,
    /// The run's exit status and streams.
    pub output: std::process::Output,
}

/// Runs `binary run <one-trial scenario> --bin-dir <the suite's board
/// binaries>` (the runner of xtask or of xrunbench) from a fresh temporary
/// directory, without `--results-dir`: where its results land.
pub fn run_one_trial_here(binary: &str, name: &str) -> RunHere {
    let dir = tempfile::tempdir().unwrap();
    let s = one_trial_scenario(dir.path(), name);
    let output = std::process::Command::new(binary)
        .current_dir(dir.path())
        .args(["run", s.to_str().unwrap(), "--bin-dir"])
        .arg(crate::boards::bin_dir())
        .output()
        .unwrap();
    let records = crate::disk::files_under(&dir.path().join("results").join(name))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "a-1.json"))
        .collect();
    RunHere {
        dir,
        records,
        output,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The builder writes the layout the tests wrote by hand, section by
    /// section, with strings quoted.
    #[test]
    fn builds_the_layout_tests_wrote_by_hand() {
        let text = ScenarioText::virtual_sink("a b")
            .trials(2)
            .warmup("200ms")
            .audio("buffer_time", "40ms")
            .hackbench("{ groups = 1 }")
            .config_with("x", "sysctl = { \"kernel.a\" = 1 }")
            .config("y")
            .tail("[gate.x]\nunderruns = { max = 1 }")
            .text();
        assert_eq!(
            text,
            "name = \"a b\"\ntrials = 2\nduration = \"1s\"\nwarmup = \"200ms\"\n\
             [audio]\ngenerate = { seconds = 1, rate = 8000, channels = 1 }\nbackend = \"virtual\"\n\
             buffer_time = \"40ms\"\n[load]\nhackbench = { groups = 1 }\n\
             [[config]]\nname = \"x\"\nsysctl = { \"kernel.a\" = 1 }\n[[config]]\nname = \"y\"\n\
             [gate.x]\nunderruns = { max = 1 }\n"
        );
    }
}
