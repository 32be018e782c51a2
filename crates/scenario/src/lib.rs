//! A scenario: the file the user writes, what it resolves to, the plan of
//! its trials and the trial spec each becomes, and its checks.
//!
//! The scenario file: what the user writes (TOML, every table closed with
//! `deny_unknown_fields`), and the resolved form the runner executes (each
//! configuration with its `[audio]` and `[load]` overrides merged and every
//! default filled in). Checks that need no system access live here; those
//! that look at the machine live in `validate`.
//!
//! `file` is what the user writes, `resolve` what the runner executes,
//! `target` the board it runs on.

use std::path::Path;

pub use xrunbench_schema::trial::KnobSpec;

mod error;
mod file;
pub mod gate;
pub mod lava;
pub mod plan;
mod resolve;
pub mod spec;
mod target;
pub mod units;
pub mod validate;

pub use error::ScenarioError;
pub use file::*;
pub use resolve::*;
pub use target::*;

/// The largest scenario read from a bisected tree: the longest in
/// `scenarios/` is a few KB.
pub const TREE_SCENARIO_MAX: usize = 1 << 20;

/// Reads, parses and resolves a scenario; checks needing no system access.
pub fn load(path: &Path) -> Result<(ScenarioFile, Scenario), ScenarioError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ScenarioError(format!("{}: cannot read: {e}", path.display())))?;
    load_text(path, &text)
}

/// [`load`] of a scenario in a tree being bisected, which nobody has read:
/// a regular file of at most [`TREE_SCENARIO_MAX`] bytes (a FIFO would
/// block the step, `/dev/zero` fill the memory).
pub fn load_from_tree(path: &Path) -> Result<(ScenarioFile, Scenario), ScenarioError> {
    let bytes = xrunbench_schema::bounded::read_regular(path, TREE_SCENARIO_MAX)
        .map_err(|e| ScenarioError(format!("{}: {e}", path.display())))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ScenarioError(format!("{}: not UTF-8 text", path.display())))?;
    load_text(path, &text)
}

/// Parses and resolves `text`, the scenario file `path`.
fn load_text(path: &Path, text: &str) -> Result<(ScenarioFile, Scenario), ScenarioError> {
    let file = parse(path, text)?;
    let scenario = resolve(path, &file)?;
    // Gates are judged after the run; a bad one is bad input now.
    gate::resolve(path, &file, &scenario)?;
    Ok((file, scenario))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Span;
    use xrunbench_schema::Priority;

    fn parse_str(text: &str) -> Result<Scenario, String> {
        let p = Path::new("s.toml");
        parse(p, text).and_then(|f| resolve(p, &f)).map_err(|e| e.0)
    }

    const MIN: &str = "name = \"x\"\n[audio]\ngenerate = {}\n[[config]]\nname = \"a\"\n";

    #[test]
    fn a_target_table_with_only_trial_timeout_is_this_machine_with_it() {
        let s = parse_str(&format!("{MIN}[target]\ntrial_timeout = \"30s\"\n")).unwrap();
        assert!(s.target.is_none() && s.lava.is_none());
        assert_eq!(s.local_trial_timeout, Some(Span::from_secs(30)));
        assert_eq!(parse_str(MIN).unwrap().local_trial_timeout, None);
        let e = parse_str(&format!(
            "duration = \"10s\"\n{MIN}[target]\ntrial_timeout = \"5s\"\n"
        ));
        assert!(e.unwrap_err().contains("target.trial_timeout"));
        // Any key about a board still wants the board named.
        let e = parse_str(&format!(
            "{MIN}[target]\ntrial_timeout = \"30s\"\nport = 22\n"
        ));
        assert!(e.unwrap_err().contains("target.ssh: missing"));
    }

    #[test]
    fn a_tree_s_scenario_is_a_regular_file_within_its_bound() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("s.toml");
        xrunbench_test_support::hostile::fifo(&fifo);
        let e = load_from_tree(&fifo).unwrap_err().0;
        assert!(e.contains("is a FIFO: expected a regular file"), "{e}");
        let big = d.path().join("big.toml");
        xrunbench_test_support::hostile::sparse_file(&big, TREE_SCENARIO_MAX as u64 + 1);
        let e = load_from_tree(&big).unwrap_err().0;
        assert!(e.contains("refused"), "{e}");
        let ok = d.path().join("ok.toml");
        std::fs::write(&ok, MIN).unwrap();
        assert!(load_from_tree(&ok).is_ok());
    }

    #[test]
    fn minimal_scenario_gets_defaults() {
        let s = parse_str(MIN).unwrap();
        assert_eq!(s.trials, DEFAULT_TRIALS);
        assert_eq!(s.duration, DEFAULT_DURATION);
        assert_eq!(s.order, Order::Interleaved);
        assert!(s.configs[0].load.is_none());
        let AudioSource::Generate(t) = &s.configs[0].audio.source else {
            panic!()
        };
        assert_eq!((t.rate, t.channels, t.seconds), (48_000, 2, Some(10.0)));
    }

    #[test]
    fn unknown_key_names_line_and_column() {
        let e = parse_str("name = \"x\"\n\n[audio]\n  bufer_time = \"20ms\"\n").unwrap_err();
        assert!(
            e.starts_with("s.toml:4:3: unknown field `bufer_time`"),
            "{e}"
        );
    }

    #[test]
    fn overrides_merge_field_by_field() {
        let s = parse_str(
            "name = \"x\"\nduration = \"5s\"\n[audio]\ngenerate = {}\npriority = \"other\"\nbuffer_time = \"20ms\"\n\
             [load]\nhackbench = { groups = 4 }\n\
             [[config]]\nname = \"a\"\n\
             [[config]]\nname = \"b\"\nload = \"none\"\n[config.audio]\npriority = \"fifo:80\"\n\
             [[config]]\nname = \"c\"\n[config.load]\nhackbench = { loops = 7 }\n",
        )
        .unwrap();
        let [a, b, c] = &s.configs[..] else { panic!() };
        assert_eq!(a.audio.priority, Some(Priority::Other(None)));
        assert_eq!(b.audio.priority, Some(Priority::Fifo(80)));
        assert_eq!(b.audio.buffer_time, Some(Span::from_micros(20_000)));
        assert_eq!(a.load.as_ref().unwrap().hackbench.groups, 4);
        assert!(b.load.is_none());
        let hc = &c.load.as_ref().unwrap().hackbench;
        assert_eq!((hc.groups, hc.loops, hc.fds), (4, 7, 20));
    }

    #[test]
    fn knobs_keep_file_order_by_kind() {
        let s = parse_str(&format!(
            "{MIN}sysctl = {{ \"kernel.sched_autogroup_enabled\" = 0 }}\nsched_features = [\"NO_NEXT_BUDDY\"]\ngovernor = \"performance\"\n"
        ))
        .unwrap();
        assert_eq!(
            s.configs[0].knobs,
            vec![
                KnobSpec::Sysctl {
                    name: "kernel.sched_autogroup_enabled".into(),
                    value: "0".into()
                },
                KnobSpec::SchedFeature {
                    word: "NO_NEXT_BUDDY".into()
                },
                KnobSpec::Governor {
                    value: "performance".into()
                },
            ]
        );
    }

    /// A scenario with a bit of everything the fingerprint covers.
    const FULL: &str = "name = \"x\"\ndescription = \"d\"\ntrials = 4\nduration = \"5s\"\nwarmup = \"1s\"\n\
        [audio]\ngenerate = { tone_hz = 440, seconds = 10 }\nbackend = \"virtual\"\nbuffer_time = \"20ms\"\npriority = \"fifo:80\"\n\
        [load]\nhackbench = { groups = 4 }\n\
        [[config]]\nname = \"a\"\nsysctl = { \"kernel.sched_autogroup_enabled\" = 0 }\n";

    fn fingerprint_of(text: &str) -> ScenarioFingerprint {
        let s = parse_str(text).unwrap();
        s.fingerprint(&s.configs[0].name).unwrap()
    }

    #[test]
    fn fingerprint_ignores_names_counts_and_order() {
        let base = fingerprint_of(FULL);
        let renamed = FULL
            .replace("name = \"x\"", "name = \"y\"")
            .replace("name = \"a\"", "name = \"b\"\nkernel = \"6.6.0\"")
            .replace("description = \"d\"", "description = \"other words\"")
            .replace("trials = 4", "trials = 9\norder = \"blocked\"");
        assert_eq!(fingerprint_of(&renamed), base);
        // Another file, elsewhere, same meaning (1000ms is 1s).
        let p = Path::new("/elsewhere/other-name.toml");
        let moved = resolve(p, &parse(p, &FULL.replace("\"1s\"", "\"1000ms\"")).unwrap()).unwrap();
        assert_eq!(moved.fingerprint("a").unwrap(), base);
        assert!(moved.fingerprint("nope").is_none());
    }

    #[test]
    fn fingerprint_names_each_difference() {
        let base = fingerprint_of(FULL);
        for (edit, key) in [
            (("duration = \"5s\"", "duration = \"6s\""), "duration"),
            (("warmup = \"1s\"", "warmup = \"2s\""), "warmup"),
            (("tone_hz = 440", "tone_hz = 441"), "audio.source"),
            (
                ("buffer_time = \"20ms\"", "buffer_time = \"40ms\""),
                "audio.buffer_time",
            ),
            (
                ("priority = \"fifo:80\"", "priority = \"other\""),
                "audio.priority",
            ),
            (
                ("backend = \"virtual\"", "backend = \"alsa\""),
                "audio.backend",
            ),
            (
                ("[load]\n", "[load]\nstart_delay = \"1s\"\n"),
                "load.start_delay",
            ),
            (("groups = 4", "groups = 5"), "load.hackbench"),
            (("hackbench = { groups = 4 }", ""), "load"),
            (("= 0 }", "= 1 }"), "knobs"),
            (
                (
                    "name = \"a\"",
                    "name = \"a\"\npm_qos_cpu_dma_latency_us = 0",
                ),
                "pm_qos_cpu_dma_latency_us",
            ),
        ] {
            let other = fingerprint_of(&FULL.replace(edit.0, edit.1));
            assert_eq!(base.differences(&other), vec![key], "{edit:?}");
            assert_eq!(other.differences(&base), vec![key], "{edit:?}");
        }
        assert!(base.differences(&base).is_empty());
    }

    #[test]
    fn fingerprint_of_a_wav_is_relative_to_the_scenario() {
        let text = "name = \"x\"\n[audio]\nfile = \"wav/a.wav\"\n[[config]]\nname = \"a\"\n";
        let at = |p: &str| {
            let p = Path::new(p);
            resolve(p, &parse(p, text).unwrap())
                .unwrap()
                .fingerprint("a")
                .unwrap()
        };
        let here = at("/home/me/bench/s.toml");
        assert_eq!(here, at("/srv/ci/checkout/s.toml"));
        assert_eq!(here, at("s.toml"));
        assert_eq!(here.audio.source, AudioSource::File("wav/a.wav".into()));
    }

    #[test]
    fn resolved_scenario_reads_back_from_run_json_with_the_same_fingerprint() {
        let s = parse_str(FULL).unwrap();
        let json = serde_json::to_string(&s).unwrap();
        let back: Scenario = serde_json::from_str(&json).unwrap();
        assert_eq!(back.fingerprint("a"), s.fingerprint("a"));
    }
    #[test]
    fn target_gets_its_defaults_and_stays_out_of_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("lab_key"), "k").unwrap();
        let p = dir.path().join("s.toml");
        let text = format!(
            "{MIN}[target]\nssh = \"root@rpi4.lab\"\nidentity = \"lab_key\"\n\
             options = [\"ProxyJump=gw\"]\n"
        );
        let s = resolve(&p, &parse(&p, &text).unwrap()).unwrap();
        let t = s.target.clone().unwrap();
        assert_eq!(t.destination, "root@rpi4.lab");
        assert_eq!(
            t.identity.as_deref(),
            Some(dir.path().join("lab_key").as_path())
        );
        assert_eq!(
            (t.workdir.as_str(), t.arch.as_str()),
            (DEFAULT_WORKDIR, "auto")
        );
        assert_eq!(
            (t.retries, t.connect_timeout),
            (DEFAULT_RETRIES, DEFAULT_CONNECT_TIMEOUT)
        );
        // 2 × (10 s + 1 s) + 60 s.
        assert_eq!(t.trial_timeout, Span::from_secs(82));
        assert_eq!(t.options, ["ProxyJump=gw"]);
        assert_eq!(t.power_cycle, None);
        let here = parse_str(MIN).unwrap();
        assert_eq!(s.fingerprint("a"), here.fingerprint("a"));
        let back: Scenario = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back.target, s.target);
    }

    #[test]
    fn target_errors_name_the_key() {
        for (table, want) in [
            (
                "ssh = \"b\"\nport = 0",
                "s.toml: target.port: must be 1 to 65535",
            ),
            (
                "ssh = \"b\"\nidentity = \"/no/such/key\"",
                "target.identity: /no/such/key: no such file",
            ),
            (
                "ssh = \"b\"\nworkdir = \"~/x\"",
                "target.workdir: `~/x`: `~` is not expanded",
            ),
            (
                "ssh = \"b\"\noptions = [\"ControlPath=/x\"]",
                "xrunbench sets ControlPath itself",
            ),
            (
                "ssh = \"b c\"",
                "target.ssh: `b c` is not an ssh destination",
            ),
            (
                "ssh = \"b\"\nconnect_timeout = \"10ms\"",
                "target.connect_timeout: 10ms is outside 1s..1h",
            ),
            (
                "ssh = \"b\"\npower_cycle = \" \"",
                "target.power_cycle: is empty",
            ),
            (
                "ssh = \"b\"\ndeploy = \" \"",
                "target.deploy: must be a shell command",
            ),
            (
                "ssh = \"b\"\nboot_timeout = \"0s\"",
                "target.boot_timeout: 0ms is outside 1s..24h",
            ),
            (
                "ssh = \"b\"\nexpect_kernel = \"\"",
                "target.expect_kernel: must be a shell command",
            ),
        ] {
            let e = parse_str(&format!("{MIN}[target]\n{table}\n")).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn a_lava_target_resolves_to_the_lab_with_its_files_beside_the_scenario() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("board-job.yaml"), "device_type: qemu\n").unwrap();
        std::fs::write(dir.path().join("token"), "t").unwrap();
        let p = dir.path().join("s.toml");
        let text = format!(
            "{MIN}[target]\nlava = {{ url = \"https://lava.example.org/\", job = \"board-job.yaml\", \
             devices = 2, token_file = \"token\" }}\ndeploy = \"./publish.sh\"\nretries = 1\n"
        );
        let s = resolve(&p, &parse(&p, &text).unwrap()).unwrap();
        assert!(s.target.is_none(), "a lab is not a board over SSH");
        let l = s.lava.clone().unwrap();
        assert_eq!(l.lab.lava.as_deref(), Some("https://lava.example.org/"));
        assert_eq!(
            l.lab.lava_job.as_deref(),
            Some(dir.path().join("board-job.yaml").as_path())
        );
        assert_eq!(l.lab.lava_devices, 2);
        assert_eq!(
            l.lab.lava_token_file.as_deref(),
            Some(dir.path().join("token").as_path())
        );
        assert_eq!((l.deploy.as_deref(), l.retries), (Some("./publish.sh"), 1));
        // The command line's lab wins; without one, the scenario's is used.
        let none = lava::LavaTargetArgs::default();
        assert_eq!(
            s.lava_lab(&none).unwrap().lava.as_deref(),
            Some("https://lava.example.org/")
        );
        let cli = lava::LavaTargetArgs {
            lava: Some("http://127.0.0.1:8000/".into()),
            ..Default::default()
        };
        assert_eq!(
            s.lava_lab(&cli).unwrap().lava.as_deref(),
            Some("http://127.0.0.1:8000/")
        );
        assert!(parse_str(MIN).unwrap().lava_lab(&none).is_none());
    }

    #[test]
    fn a_lava_target_refuses_a_token_in_the_scenario_and_board_keys_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("job.yaml"), "device_type: qemu\n").unwrap();
        let p = dir.path().join("s.toml");
        let lab = "url = \"https://lava.example.org/\", job = \"job.yaml\"";
        for (table, want) in [
            (
                format!("lava = {{ {lab}, token = \"s3cr3t-token\" }}"),
                "s.toml: target.lava.token: a token is never written in the scenario",
            ),
            (
                format!("lava = {{ {lab} }}\nssh = \"root@b\""),
                "target.ssh: not with `lava`",
            ),
            (
                format!("lava = {{ {lab} }}\ntrial_timeout = \"60min\""),
                "target.trial_timeout: not with `lava`",
            ),
            (
                format!("lava = {{ {lab} }}\nretries = 101"),
                "target.retries: 101 is more than 100",
            ),
            (
                format!("lava = {{ {lab} }}\ndeploy = \" \""),
                "target.deploy: must be a shell command",
            ),
            (
                format!("lava = {{ {lab}, devices = 0 }}"),
                "target.lava.devices: 0: expected at least 1",
            ),
            (
                "lava = { url = \"ftp://lava\", job = \"job.yaml\" }".to_string(),
                "target.lava.url: ",
            ),
            (
                "lava = { url = \"https://l/\", job = \"nope.yaml\" }".to_string(),
                "target.lava.job: ",
            ),
            (
                format!("lava = {{ {lab}, device = 2 }}"),
                "unknown field `device`",
            ),
            (
                "lava = { job = \"job.yaml\" }".to_string(),
                "missing field `url`",
            ),
        ] {
            let text = format!("{MIN}[target]\n{table}\n");
            let e = parse(&p, &text)
                .and_then(|f| resolve(&p, &f))
                .map(drop)
                .unwrap_err()
                .0;
            assert!(e.contains(want), "{table}: {e}");
            assert!(!e.contains("s3cr3t"), "the token was said: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        // A token never goes back out with the file.
        let f = parse(
            &p,
            &format!("{MIN}[target]\nlava = {{ {lab}, token = \"s3cr3t-token\" }}\n"),
        )
        .unwrap();
        assert!(!toml::to_string(&f).unwrap().contains("s3cr3t"));
        assert!(!serde_json::to_string(&f).unwrap().contains("s3cr3t"));
    }

    #[test]
    fn monitor_table_resolves_to_cyclictests_defaults_and_errors_name_the_key() {
        let s = parse_str(&format!("{MIN}[monitor]\ntrace = true\n")).unwrap();
        let m = s.monitor.clone().unwrap();
        assert_eq!(
            (m.priority, m.interval_us, m.threshold_us),
            (99, 1000, 1000)
        );
        assert!(m.latency && m.trace);
        let s2 = parse_str(&format!(
            "{MIN}[monitor]\ncpus = \"1\"\ninterval = \"500us\"\nthreshold = \"2ms\"\n"
        ))
        .unwrap();
        let m2 = s2.monitor.clone().unwrap();
        assert_eq!((m2.interval_us, m2.threshold_us), (500, 2000));
        assert_eq!(m2.cpus.unwrap().cpus(), &[1]);
        assert!(
            s.fingerprint("a")
                .unwrap()
                .differences(&s2.fingerprint("a").unwrap())
                == ["monitor"]
        );
        assert!(parse_str(MIN).unwrap().monitor.is_none());
        for (table, want) in [
            (
                "priority = 0",
                "s.toml: monitor.priority: 0 is not a SCHED_FIFO priority",
            ),
            (
                "interval = \"10us\"",
                "monitor.interval: 10 us must be between",
            ),
            ("latency = false", "monitor.latency: false with trace false"),
            (
                "trace_buffer_kb = 1",
                "monitor.trace_buffer_kb: 1 must be between",
            ),
            ("bogus = 1", "unknown field `bogus`"),
        ] {
            let e = parse_str(&format!("{MIN}[monitor]\n{table}\n")).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }
}
