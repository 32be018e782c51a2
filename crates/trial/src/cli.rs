//! `xrun-trial`'s command line, parsed by hand.
//!
//! Not clap, which the host tools use: `xrun-trial` is a board binary with
//! a 1 MB budget, and clap's builder was a seventh of it (measured; see the
//! board sizes in docs/boards-and-lab.md) — ripgrep 14 left clap for its
//! own parser for the same kind of reason. The grammar is small, so the
//! parser is too: global options anywhere, one command, its options and
//! operands; `--opt VALUE` and `--opt=VALUE`; `--` ends the options. Every
//! error is one line that names the argument and what was expected; help
//! and version go to stdout.

use std::ffi::OsString;
use std::path::PathBuf;

use xrunbench_schema::monitor::MonitorAlone;
use xrunbench_schema::CpuList;

/// What the command line asks for.
pub struct Cli {
    /// `--bin-dir`: where xrun-player and xrun-hackbench are.
    pub bin_dir: Option<PathBuf>,
    /// `--test-root` (tests only): knobs in a private tree.
    pub test_root: Option<PathBuf>,
    /// The command.
    pub command: Command,
}

/// The commands, with their arguments.
pub enum Command {
    /// `run [SPEC] [--monitor] [--trace]`.
    Run {
        /// The spec file, or `-`.
        spec: PathBuf,
        /// `--monitor`.
        monitor: bool,
        /// `--trace`.
        trace: bool,
    },
    /// `restore`.
    Restore,
    /// `monitor [--duration S] [--cpus L] …`.
    Monitor(MonitorAlone),
    /// `probe`.
    Probe,
    /// `check [SPEC…] [--read-only] [--json]`.
    Check {
        /// Spec files, or `-`.
        specs: Vec<PathBuf>,
        /// `--read-only`.
        read_only: bool,
        /// `--json`.
        json: bool,
    },
    /// `summarize [--gates FILE] RECORD…`.
    Summarize {
        /// `--gates`.
        gates: Option<PathBuf>,
        /// Trial records.
        records: Vec<PathBuf>,
    },
}

/// What parsing found: a command to run, or text to print (help, version)
/// before exiting 0.
pub enum Parsed {
    /// Run this.
    Run(Cli),
    /// Print this on stdout and exit 0.
    Print(String),
}

/// A command-line error: one line.
#[derive(Debug, PartialEq)]
pub struct CliError(pub String);

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One option: its long name, the name of its value (`None`: a flag), its
/// help (`None`: hidden).
struct Opt {
    long: &'static str,
    value: Option<&'static str>,
    help: Option<&'static str>,
}

/// One command: its name, its line in the command list, its operands as
/// the usage line shows them, its help and its options.
struct Cmd {
    name: &'static str,
    brief: &'static str,
    operands: &'static str,
    about: &'static str,
    opts: &'static [Opt],
}

const ABOUT: &str = "Runs xrunbench trials on this machine: knobs applied, read back and \
always restored; the load and the player as separate processes.";

const GLOBAL: &[Opt] = &[
    Opt {
        long: "bin-dir",
        value: Some("DIR"),
        help: Some("Where xrun-player and xrun-hackbench are (default: beside xrun-trial)"),
    },
    // Tests only: knobs and journals in a private tree under DIR.
    Opt {
        long: "test-root",
        value: Some("DIR"),
        help: None,
    },
];

const COMMANDS: &[Cmd] = &[
    Cmd {
        name: "run",
        brief: "Run one trial",
        operands: "[SPEC]",
        about: "Run one trial: SPEC is an xrunbench.trial-spec/1 file, or `-` (the default) \
for exactly one JSON document on stdin (keep stdin open: its end stops the trial). Exit 0 \
ran, 1 could not run, 2 bad spec, 128+N signal N.",
        opts: &[
            Opt {
                long: "monitor",
                value: None,
                help: Some(
                    "Run the latency monitor beside playback (the spec's `monitor`, else its \
defaults: SCHED_FIFO 99, every 1000 us, on the playback CPUs)",
                ),
            },
            Opt {
                long: "trace",
                value: None,
                help: Some(
                    "Trace the scheduler and account for every underrun and spike (tracefs; \
said once and skipped where it is missing)",
                ),
            },
        ],
    },
    Cmd {
        name: "restore",
        brief: "Restore every knob a killed trial left changed",
        operands: "",
        about: "Restore every knob a killed trial left changed (replays the journals).",
        opts: &[],
    },
    Cmd {
        name: "monitor",
        brief: "The latency monitor alone, as cyclictest",
        operands: "",
        about: "The latency monitor alone, as cyclictest: one SCHED_FIFO thread per CPU for \
SECONDS; prints its xrunbench monitor report (JSON).",
        opts: &[
            Opt {
                long: "duration",
                value: Some("SECONDS"),
                help: Some("How long [default: 30]"),
            },
            Opt {
                long: "cpus",
                value: Some("LIST"),
                help: Some("CPUs, e.g. 0,2-3 (default: every CPU this process may use)"),
            },
            Opt {
                long: "priority",
                value: Some("N"),
                help: Some("SCHED_FIFO priority, 1-99 [default: 99]"),
            },
            Opt {
                long: "interval-us",
                value: Some("US"),
                help: Some("Interval, 100-1000000 us [default: 1000]"),
            },
            Opt {
                long: "threshold-us",
                value: Some("US"),
                help: Some("Spike threshold, us, at least 1 [default: 1000]"),
            },
            Opt {
                long: "pm-qos-us",
                value: Some("US"),
                help: Some(
                    "Hold /dev/cpu_dma_latency at this many us meanwhile (cyclictest holds 0 \
unless given --laptop)",
                ),
            },
        ],
    },
    Cmd {
        name: "probe",
        brief: "Print what this machine offers (JSON)",
        operands: "",
        about: "Print what this machine offers (xrunbench.probe/1 JSON).",
        opts: &[],
    },
    Cmd {
        name: "check",
        brief: "Check that specs can run here",
        operands: "[SPEC]...",
        about: "Check that specs can run here: every problem, one line each; exit 0 none, 1 \
some. Knobs are written, read back and restored at once. SPEC: spec files, or `-` (the \
default) for every JSON document on stdin.",
        opts: &[
            Opt {
                long: "read-only",
                value: None,
                help: Some("Do not write the knobs: only check they exist and open for writing"),
            },
            Opt {
                long: "json",
                value: None,
                help: Some("Print an xrunbench.check/1 document instead of lines"),
            },
        ],
    },
    Cmd {
        name: "summarize",
        brief: "Summarize trial records for LAVA: one line per configuration x metric and per gate",
        operands: "<RECORD>...",
        about: "Summarize trial records (xrunbench.trial/1), one line per configuration x \
metric (the mean of its trials) and one per gate: `NAME pass|fail MEASUREMENT UNITS`, what \
a LAVA test definition reports with lava-test-case. Exit 0 whatever the gates say, 2 for a \
bad file.",
        opts: &[Opt {
            long: "gates",
            value: Some("FILE"),
            help: Some("An xrunbench.gates/1 file: limits to judge"),
        }],
    },
];

/// Parses the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed, CliError> {
    let mut given = Given::default();
    let mut cmd: Option<&'static Cmd> = None;
    let mut args = args.into_iter();
    let mut only_operands = false;
    while let Some(arg) = args.next() {
        let text = arg.to_str();
        if only_operands || !text.is_some_and(|t| t.starts_with('-') && t != "-") {
            match cmd {
                Some(_) => given.operands.push(arg),
                None => cmd = Some(command_named(&arg)?),
            }
            continue;
        }
        let text = text.unwrap_or_default();
        match text {
            "--" => only_operands = true,
            "-h" | "--help" => return Ok(Parsed::Print(help(cmd))),
            "-V" | "--version" => return Ok(Parsed::Print(version())),
            _ => {
                let Some(body) = text.strip_prefix("--") else {
                    return Err(unexpected(text, cmd));
                };
                let (name, inline) = match body.split_once('=') {
                    Some((n, v)) => (n, Some(OsString::from(v))),
                    None => (body, None),
                };
                let opt = find_opt(name, cmd).ok_or_else(|| unexpected(text, cmd))?;
                let value = match (opt.value, inline) {
                    (None, None) => None,
                    (None, Some(_)) => {
                        return Err(CliError(format!("--{name} takes no value")));
                    }
                    (Some(_), Some(v)) => Some(v),
                    (Some(what), None) => Some(
                        args.next()
                            .ok_or_else(|| CliError(format!("--{name} needs a value ({what})")))?,
                    ),
                };
                if given.options.iter().any(|(n, _)| *n == opt.long) {
                    return Err(CliError(format!("--{name} is given more than once")));
                }
                given.options.push((opt.long, value));
            }
        }
    }
    if cmd.is_some_and(|c| c.name == "help") {
        // `help [COMMAND]`.
        let of = match given.operands.first() {
            Some(name) => Some(command_named(name)?),
            None => None,
        };
        return Ok(Parsed::Print(help(of)));
    }
    let Some(cmd) = cmd else {
        return Err(CliError(format!(
            "no command given: one of {} (see `xrun-trial --help`)",
            command_names()
        )));
    };
    let cli = Cli {
        bin_dir: given.path("bin-dir"),
        test_root: given.path("test-root"),
        command: given.command(cmd)?,
    };
    Ok(Parsed::Run(cli))
}

/// The options and operands seen, before they are typed.
#[derive(Default)]
struct Given {
    options: Vec<(&'static str, Option<OsString>)>,
    operands: Vec<OsString>,
}

impl Given {
    fn flag(&self, long: &str) -> bool {
        self.options.iter().any(|(n, _)| *n == long)
    }

    fn value(&self, long: &str) -> Option<&OsString> {
        self.options
            .iter()
            .find(|(n, _)| *n == long)
            .and_then(|(_, v)| v.as_ref())
    }

    fn path(&self, long: &str) -> Option<PathBuf> {
        self.value(long).map(PathBuf::from)
    }

    /// The value of `--long` as text, for a number or a CPU list.
    fn text(&self, long: &str) -> Result<Option<&str>, CliError> {
        self.value(long)
            .map(|v| {
                v.to_str()
                    .ok_or_else(|| CliError(format!("--{long}: the value is not UTF-8")))
            })
            .transpose()
    }

    fn number<T>(&self, long: &str, min: T, max: T, default: T) -> Result<T, CliError>
    where
        T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
    {
        let Some(text) = self.text(long)? else {
            return Ok(default);
        };
        match text.parse::<T>() {
            Ok(n) if n >= min && n <= max => Ok(n),
            _ => Err(CliError(format!(
                "--{long}: '{text}' is not a whole number in {min}..={max}"
            ))),
        }
    }

    fn operands_as_paths(&self) -> Vec<PathBuf> {
        self.operands.iter().map(PathBuf::from).collect()
    }

    /// At most `n` operands for `cmd`.
    fn at_most(&self, cmd: &Cmd, n: usize) -> Result<(), CliError> {
        match self.operands.get(n) {
            Some(extra) => Err(CliError(format!(
                "unexpected argument '{}' for `xrun-trial {}` (see `xrun-trial {} --help`)",
                extra.to_string_lossy(),
                cmd.name,
                cmd.name
            ))),
            None => Ok(()),
        }
    }

    fn command(&self, cmd: &Cmd) -> Result<Command, CliError> {
        let max = match cmd.name {
            "run" => 1,
            "check" | "summarize" => usize::MAX,
            _ => 0,
        };
        if max != usize::MAX {
            self.at_most(cmd, max)?;
        }
        Ok(match cmd.name {
            "run" => Command::Run {
                spec: self
                    .operands_as_paths()
                    .pop()
                    .unwrap_or_else(|| PathBuf::from("-")),
                monitor: self.flag("monitor"),
                trace: self.flag("trace"),
            },
            "restore" => Command::Restore,
            "probe" => Command::Probe,
            "monitor" => {
                let d = MonitorAlone::default();
                Command::Monitor(MonitorAlone {
                    duration_s: self.number("duration", 0, u64::MAX, d.duration_s)?,
                    cpus: self
                        .text("cpus")?
                        .map(|t| {
                            t.parse::<CpuList>()
                                .map_err(|e| CliError(format!("--cpus: {e}")))
                        })
                        .transpose()?,
                    priority: self.number("priority", 1, 99, d.priority)?,
                    interval_us: self.number("interval-us", 100, 1_000_000, d.interval_us)?,
                    threshold_us: self.number("threshold-us", 1, u32::MAX, d.threshold_us)?,
                    pm_qos_us: match self.text("pm-qos-us")? {
                        Some(_) => Some(self.number("pm-qos-us", 0, u32::MAX, 0)?),
                        None => None,
                    },
                })
            }
            "check" => Command::Check {
                specs: match self.operands_as_paths() {
                    v if v.is_empty() => vec![PathBuf::from("-")],
                    v => v,
                },
                read_only: self.flag("read-only"),
                json: self.flag("json"),
            },
            "summarize" => {
                if self.operands.is_empty() {
                    return Err(CliError(
                        "`xrun-trial summarize` needs at least one RECORD (a trial record file)"
                            .into(),
                    ));
                }
                Command::Summarize {
                    gates: self.path("gates"),
                    records: self.operands_as_paths(),
                }
            }
            other => unreachable!("command {other} is in COMMANDS but not typed"),
        })
    }
}

/// The command called `name` (or `help`, which prints the help).
fn command_named(name: &OsString) -> Result<&'static Cmd, CliError> {
    static HELP_CMD: Cmd = Cmd {
        name: "help",
        brief: "",
        operands: "",
        about: "",
        opts: &[],
    };
    let text = name.to_string_lossy();
    if text == "help" {
        return Ok(&HELP_CMD);
    }
    COMMANDS.iter().find(|c| c.name == text).ok_or_else(|| {
        CliError(format!(
            "unrecognized command '{text}': one of {} (see `xrun-trial --help`)",
            command_names()
        ))
    })
}

fn command_names() -> String {
    COMMANDS
        .iter()
        .map(|c| c.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The option `name` of `cmd` or a global one.
fn find_opt(name: &str, cmd: Option<&'static Cmd>) -> Option<&'static Opt> {
    let own: &'static [Opt] = cmd.map_or(&[], |c| c.opts);
    own.iter().chain(GLOBAL).find(|o| o.long == name)
}

fn unexpected(arg: &str, cmd: Option<&Cmd>) -> CliError {
    CliError(match cmd {
        Some(c) if c.name != "help" => format!(
            "unexpected argument '{arg}' for `xrun-trial {}` (see `xrun-trial {} --help`)",
            c.name, c.name
        ),
        _ => format!("unexpected argument '{arg}' (see `xrun-trial --help`)"),
    })
}

fn version() -> String {
    format!("xrun-trial {}\n", env!("CARGO_PKG_VERSION"))
}

/// The help of `cmd`, or of the program when there is none.
fn help(cmd: Option<&Cmd>) -> String {
    let mut out = String::new();
    match cmd.filter(|c| c.name != "help") {
        None => {
            out += &wrap(ABOUT, 0);
            out += "\nUsage: xrun-trial [OPTIONS] <COMMAND>\n\nCommands:\n";
            let rows: Vec<(String, &str)> = COMMANDS
                .iter()
                .map(|c| (c.name.to_string(), c.brief))
                .chain(std::iter::once((
                    "help".to_string(),
                    "Print this message or the help of the given command(s)",
                )))
                .collect();
            out += &table(&rows);
            out += "\nOptions:\n";
            out += &table(&option_rows(&[]));
        }
        Some(c) => {
            out += &wrap(c.about, 0);
            let operands = if c.operands.is_empty() {
                String::new()
            } else {
                format!(" {}", c.operands)
            };
            out += &format!(
                "\nUsage: xrun-trial {} [OPTIONS]{operands}\n\nOptions:\n",
                c.name
            );
            out += &table(&option_rows(c.opts));
        }
    }
    out
}

/// The option rows of the help: the command's, the global ones, help.
fn option_rows(own: &[Opt]) -> Vec<(String, &'static str)> {
    let mut rows: Vec<(String, &'static str)> = own
        .iter()
        .chain(GLOBAL)
        .filter_map(|o| {
            let help = o.help?;
            let name = match o.value {
                Some(v) => format!("    --{} <{v}>", o.long),
                None => format!("    --{}", o.long),
            };
            Some((name, help))
        })
        .collect();
    rows.push(("-h, --help".into(), "Print help"));
    rows.push(("-V, --version".into(), "Print version"));
    rows
}

/// Two columns, the second wrapped at 100 columns.
fn table(rows: &[(String, &str)]) -> String {
    let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, help) in rows {
        out += &format!("  {name:<width$}  ");
        let indent = width + 4;
        out += wrap(help, indent).trim_start();
    }
    out
}

/// `text` wrapped at 100 columns, continuation lines indented by `indent`.
fn wrap(text: &str, indent: usize) -> String {
    const WIDTH: usize = 100;
    let mut out = String::new();
    let mut col = indent;
    out += &" ".repeat(indent);
    let mut first = true;
    for word in text.split_whitespace() {
        if !first && col + 1 + word.len() > WIDTH {
            out += "\n";
            out += &" ".repeat(indent);
            col = indent;
            first = true;
        }
        if !first {
            out.push(' ');
            col += 1;
        }
        out += word;
        col += word.len();
        first = false;
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> Result<Parsed, CliError> {
        parse(args.iter().map(OsString::from))
    }

    fn cli(args: &[&str]) -> Cli {
        match parse_str(args) {
            Ok(Parsed::Run(c)) => c,
            Ok(Parsed::Print(t)) => panic!("printed {t}"),
            Err(e) => panic!("{e}"),
        }
    }

    fn error(args: &[&str]) -> String {
        match parse_str(args) {
            Err(e) => e.0,
            Ok(_) => panic!("{args:?} parsed"),
        }
    }

    #[test]
    fn run_defaults_to_stdin_and_takes_global_options_anywhere() {
        let c = cli(&["run", "--monitor", "--bin-dir", "/opt/b", "-"]);
        assert_eq!(c.bin_dir, Some(PathBuf::from("/opt/b")));
        match c.command {
            Command::Run {
                spec,
                monitor,
                trace,
            } => assert_eq!((spec, monitor, trace), (PathBuf::from("-"), true, false)),
            _ => panic!("not run"),
        }
        let c = cli(&[
            "--bin-dir=/b",
            "--test-root",
            "/t",
            "run",
            "spec.json",
            "--trace",
        ]);
        assert_eq!(c.test_root, Some(PathBuf::from("/t")));
        assert!(
            matches!(c.command, Command::Run { spec, trace: true, .. } if spec == std::path::Path::new("spec.json"))
        );
        assert!(
            matches!(cli(&["run"]).command, Command::Run { spec, .. } if spec == std::path::Path::new("-"))
        );
    }

    #[test]
    fn monitor_numbers_have_cyclictests_defaults_and_ranges() {
        match cli(&["monitor"]).command {
            Command::Monitor(m) => {
                assert_eq!(
                    (m.duration_s, m.priority, m.interval_us, m.threshold_us),
                    (30, 99, 1000, 1000)
                );
                assert!(m.cpus.is_none() && m.pm_qos_us.is_none());
                assert_eq!(m, MonitorAlone::default());
            }
            _ => panic!("not monitor"),
        }
        match cli(&[
            "monitor",
            "--cpus",
            "0-1",
            "--pm-qos-us",
            "0",
            "--priority=50",
        ])
        .command
        {
            Command::Monitor(m) => {
                assert_eq!(m.cpus.unwrap().cpus(), vec![0, 1]);
                assert_eq!((m.pm_qos_us, m.priority), (Some(0), 50));
            }
            _ => panic!("not monitor"),
        }
        assert_eq!(
            error(&["monitor", "--priority", "100"]),
            "--priority: '100' is not a whole number in 1..=99"
        );
        assert_eq!(
            error(&["monitor", "--interval-us", "50"]),
            "--interval-us: '50' is not a whole number in 100..=1000000"
        );
        assert!(error(&["monitor", "--cpus", "x"]).starts_with("--cpus: "));
    }

    /// The host builds `xrun-trial monitor`'s command line with
    /// `MonitorAlone::to_args`: this parser reads back exactly what it wrote.
    #[test]
    fn the_hosts_monitor_command_line_parses_back_to_itself() {
        let asks = [
            MonitorAlone::default(),
            MonitorAlone {
                duration_s: 7,
                cpus: Some("0,2-3".parse().unwrap()),
                priority: 1,
                interval_us: 100,
                threshold_us: 20_000,
                pm_qos_us: Some(0),
            },
        ];
        for ask in asks {
            let args = ask.to_args();
            let words: Vec<&str> = args.iter().map(String::as_str).collect();
            match cli(&words).command {
                Command::Monitor(m) => assert_eq!(m, ask, "{args:?}"),
                _ => panic!("not monitor: {args:?}"),
            }
        }
    }

    #[test]
    fn check_and_summarize_take_many_operands() {
        match cli(&["check", "a.json", "b.json", "--read-only", "--json"]).command {
            Command::Check {
                specs,
                read_only,
                json,
            } => {
                assert_eq!(specs.len(), 2);
                assert!(read_only && json);
            }
            _ => panic!("not check"),
        }
        assert!(
            matches!(cli(&["check"]).command, Command::Check { specs, .. } if specs == vec![PathBuf::from("-")])
        );
        match cli(&["summarize", "--gates", "g.json", "r1", "r2"]).command {
            Command::Summarize { gates, records } => {
                assert_eq!(gates, Some(PathBuf::from("g.json")));
                assert_eq!(records.len(), 2);
            }
            _ => panic!("not summarize"),
        }
        assert_eq!(
            error(&["summarize"]),
            "`xrun-trial summarize` needs at least one RECORD (a trial record file)"
        );
        // `--` ends the options: a record named like one.
        assert!(
            matches!(cli(&["summarize", "--", "--odd"]).command, Command::Summarize { records, .. } if records == vec![PathBuf::from("--odd")])
        );
    }

    #[test]
    fn every_mistake_is_one_line_naming_it() {
        assert_eq!(
            error(&["run", "--bogus"]),
            "unexpected argument '--bogus' for `xrun-trial run` (see `xrun-trial run --help`)"
        );
        assert_eq!(
            error(&["probe", "extra"]),
            "unexpected argument 'extra' for `xrun-trial probe` (see `xrun-trial probe --help`)"
        );
        assert_eq!(
            error(&["run", "a", "b"]),
            "unexpected argument 'b' for `xrun-trial run` (see `xrun-trial run --help`)"
        );
        assert_eq!(
            error(&["frobnicate"]),
            "unrecognized command 'frobnicate': one of run, restore, monitor, probe, check, \
             summarize (see `xrun-trial --help`)"
        );
        assert_eq!(
            error(&[]),
            "no command given: one of run, restore, monitor, probe, check, summarize (see \
             `xrun-trial --help`)"
        );
        assert_eq!(error(&["run", "--monitor=yes"]), "--monitor takes no value");
        assert_eq!(
            error(&["summarize", "--gates"]),
            "--gates needs a value (FILE)"
        );
        assert_eq!(
            error(&["check", "--json", "--json"]),
            "--json is given more than once"
        );
        // A command's option is not another command's.
        assert!(error(&["probe", "--json"]).starts_with("unexpected argument '--json'"));
        for args in [
            &["run", "--bogus"][..],
            &["monitor", "--priority", "0"],
            &[],
        ] {
            assert!(!error(args).contains('\n'), "{args:?}");
        }
    }

    #[test]
    fn help_and_version_print_and_hide_the_test_option() {
        let Ok(Parsed::Print(top)) = parse_str(&["--help"]) else {
            panic!("no help");
        };
        for c in COMMANDS {
            assert!(top.contains(&format!("  {}", c.name)), "{top}");
        }
        assert!(
            top.contains("--bin-dir <DIR>") && !top.contains("test-root"),
            "{top}"
        );
        assert!(top.lines().all(|l| l.chars().count() <= 100), "{top}");
        let Ok(Parsed::Print(run)) = parse_str(&["run", "-h"]) else {
            panic!("no run help");
        };
        assert!(
            run.contains("Usage: xrun-trial run [OPTIONS] [SPEC]"),
            "{run}"
        );
        assert!(
            run.contains("--monitor") && run.contains("--trace"),
            "{run}"
        );
        assert!(matches!(parse_str(&["help"]), Ok(Parsed::Print(t)) if t == top));
        assert!(matches!(parse_str(&["help", "run"]), Ok(Parsed::Print(t)) if t == run));
        assert!(matches!(parse_str(&["-V"]), Ok(Parsed::Print(t)) if t.starts_with("xrun-trial ")));
    }
}
