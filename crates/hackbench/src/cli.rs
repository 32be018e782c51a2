//! The command line, parsed the way rt-tests hackbench 2.x parses it.
//!
//! rt-tests uses glibc `getopt_long` with the option string
//! `"f:Fg:hl:pis:TP"`; users paste those command lines (and copy the error
//! messages into mails), so this is a small getopt-compatible parser rather
//! than clap: argument permutation, `--` as end of options, clustered short
//! options (`-Tpg4`), `-g4` and `-g 4`, `--groups=4` and `--groups 4`, unique
//! prefixes of long options (`--process` for `--processes`), and glibc's
//! exact diagnostics.
//!
//! Deliberate differences from rt-tests 2.4, all of which only turn one of
//! its failures or silent misreadings into something sensible:
//! * A negative number is rejected like 0 (rt-tests stores it in an
//!   unsigned variable, accepts it and then fails to allocate).
//! * `--groups=4` as the last argument works (2.4 indexes `argv` with the
//!   long option's table index and rejects it; upstream fixed this later).
//! * Positional arguments are read in the old Ingo Molnar form
//!   `[-pipe] <num groups> [process|thread] [loops]` (2.x ignores them), so
//!   `xrun-hackbench 6` runs 6 groups as the LKML reports mean it.
//! * Our extensions `--json`, `--repeat` and `--duration` are matched only
//!   after rt-tests' own long options, so every prefix that rt-tests accepts
//!   (`--d` for `--datasize`) keeps its meaning.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use crate::{Mode, Params, Transport};

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `-h`/`--help`: print the usage on stdout and exit 0.
    Help,
    /// Run the load.
    Run(Options),
}

/// Everything a run needs, as parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The load itself.
    pub params: Params,
    /// `--repeat N`: number of rounds (None: not given).
    pub repeat: Option<u64>,
    /// `--duration SECS`: run rounds back to back for this long.
    pub duration: Option<Duration>,
    /// `--json FILE|-`: where to write the report.
    pub json: Option<JsonTarget>,
}

/// Where `--json` writes.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonTarget {
    /// `-`: standard output (the human lines then go to stderr).
    Stdout,
    /// A file, written atomically.
    File(PathBuf),
}

/// A command-line error: the diagnostic to print on stderr, after which the
/// caller prints the usage on stdout and exits 1, as rt-tests does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    /// The complete diagnostic line(s), without the trailing newline; empty
    /// when rt-tests prints nothing but the usage.
    pub message: String,
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UsageError {}

/// The usage text, byte for byte rt-tests 2.4's (version header included,
/// because it names the behaviour we reproduce), followed by our additions.
pub fn usage() -> String {
    let mut s = String::from(
        "hackbench V 2.40\n\
         Usage:\n\
         hackbench <options>\n\n\
         -f       --fds=NUM         number of fds\n\
         -F       --fifo            use SCHED_FIFO for main thread\n\
         -g       --groups=NUM      number of groups to be used\n\
         -h       --help            print this message\n\
         -l       --loops=LOOPS     how many message should be send\n\
         -p       --pipe            send data via a pipe\n\
         -i       --inet            send data via a inet tcp connection\n\
         -s       --datasize=SIZE   message size\n\
         -T       --threads         use POSIX threads\n\
         -P       --process         use fork (default)\n",
    );
    s.push_str(
        "\nxrun-hackbench additions:\n\
         \x20        --repeat=N        run N rounds back to back\n\
         \x20        --duration=SECS   run rounds back to back for SECS seconds\n\
         \x20        --json=FILE       write an xrunbench.hackbench/1 report (- = stdout)\n\
         \x20        [-pipe] <groups> [process|thread] [loops]   old positional form\n",
    );
    s
}

/// Whether a long option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HasArg {
    No,
    Required,
}

/// One entry of a `struct option` table.
struct LongOpt {
    name: &'static str,
    has_arg: HasArg,
    /// The short option it stands for (or a private code for extensions).
    code: char,
}

/// rt-tests' table, in its order (the order of glibc's "possibilities").
const RT_LONGOPTS: &[LongOpt] = &[
    lo("fds", HasArg::Required, 'f'),
    lo("fifo", HasArg::No, 'F'),
    lo("groups", HasArg::Required, 'g'),
    lo("help", HasArg::No, 'h'),
    lo("loops", HasArg::Required, 'l'),
    lo("pipe", HasArg::No, 'p'),
    lo("inet", HasArg::No, 'i'),
    lo("datasize", HasArg::Required, 's'),
    lo("threads", HasArg::No, 'T'),
    lo("processes", HasArg::No, 'P'),
];

/// Codes of our extensions; not valid short options.
const CODE_JSON: char = '\u{1}';
const CODE_REPEAT: char = '\u{2}';
const CODE_DURATION: char = '\u{3}';

/// Our extensions, matched only when nothing in [`RT_LONGOPTS`] matches.
const EXT_LONGOPTS: &[LongOpt] = &[
    lo("json", HasArg::Required, CODE_JSON),
    lo("repeat", HasArg::Required, CODE_REPEAT),
    lo("duration", HasArg::Required, CODE_DURATION),
];

const fn lo(name: &'static str, has_arg: HasArg, code: char) -> LongOpt {
    LongOpt {
        name,
        has_arg,
        code,
    }
}

/// rt-tests' short option string.
const SHORTOPTS: &str = "f:Fg:hl:pis:TP";

/// One option as getopt returns it: its code and its value, if any.
type Found = (char, Option<String>);

/// Parses `args` (without `argv[0]`); `prog` is `argv[0]`, which prefixes
/// every diagnostic as it does in rt-tests.
pub fn parse(prog: &str, args: &[String]) -> Result<Command, UsageError> {
    let (found, positional) = getopt(prog, args)?;
    let mut b = Builder::default();
    for (code, value) in found {
        if code == 'h' {
            return Ok(Command::Help);
        }
        b.apply(prog, code, value.as_deref())?;
    }
    if b.params.transport_pipe && b.params.transport_inet {
        return Err(err(format!(
            "{prog}: --pipe|-p and --inet|-i cannot be used together"
        )));
    }
    b.positional(prog, &positional)?;
    Ok(Command::Run(b.finish()))
}

fn err(message: String) -> UsageError {
    UsageError { message }
}

/// Walks `args` like GNU getopt_long: options in order, non-options set
/// aside (permutation), everything after `--` positional.
fn getopt(prog: &str, args: &[String]) -> Result<(Vec<Found>, Vec<String>), UsageError> {
    let mut found = Vec::new();
    let mut positional = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            positional.extend(args[i..].iter().cloned());
            break;
        }
        if arg == "-pipe" {
            // The pre-getopt spelling; rt-tests 2.x rejects it ("invalid
            // option -- 'e'"), so accepting it changes no valid command.
            found.push(('p', None));
        } else if let Some(long) = arg.strip_prefix("--") {
            found.push(long_option(prog, long, args, &mut i)?);
        } else if arg.len() > 1 && arg.starts_with('-') {
            short_cluster(prog, &arg[1..], args, &mut i, &mut found)?;
        } else {
            positional.push(arg.clone());
        }
    }
    Ok((found, positional))
}

/// Parses one `--name[=value]`; may consume the next argument as value.
fn long_option(
    prog: &str,
    text: &str,
    args: &[String],
    i: &mut usize,
) -> Result<Found, UsageError> {
    let (name, inline) = match text.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (text, None),
    };
    let opt = resolve(prog, text, name)?;
    match (opt.has_arg, inline) {
        (HasArg::No, Some(_)) => Err(err(format!(
            "{prog}: option '--{}' doesn't allow an argument",
            opt.name
        ))),
        (HasArg::No, None) => Ok((opt.code, None)),
        (HasArg::Required, Some(v)) => Ok((opt.code, Some(v.to_string()))),
        (HasArg::Required, None) => match args.get(*i) {
            Some(v) => {
                *i += 1;
                Ok((opt.code, Some(v.clone())))
            }
            None => Err(err(format!(
                "{prog}: option '--{}' requires an argument",
                opt.name
            ))),
        },
    }
}

/// Finds the option `name` stands for: rt-tests' table first, then ours.
fn resolve(prog: &str, text: &str, name: &str) -> Result<&'static LongOpt, UsageError> {
    let found = match lookup(name, RT_LONGOPTS) {
        Lookup::None => lookup(name, EXT_LONGOPTS),
        other => other,
    };
    match found {
        Lookup::One(o) => Ok(o),
        Lookup::None => Err(err(format!("{prog}: unrecognized option '--{text}'"))),
        Lookup::Ambiguous(list) => {
            let mut m = format!("{prog}: option '--{text}' is ambiguous; possibilities:");
            for o in list {
                let _ = write!(m, " '--{}'", o.name);
            }
            Err(err(m))
        }
    }
}

enum Lookup {
    None,
    One(&'static LongOpt),
    Ambiguous(Vec<&'static LongOpt>),
}

/// Exact match first, else a unique prefix (glibc also accepts several
/// prefix matches that stand for the same option; none of ours do).
fn lookup(name: &str, table: &'static [LongOpt]) -> Lookup {
    if let Some(o) = table.iter().find(|o| o.name == name) {
        return Lookup::One(o);
    }
    let matches: Vec<&LongOpt> = table.iter().filter(|o| o.name.starts_with(name)).collect();
    match matches.len() {
        0 => Lookup::None,
        1 => Lookup::One(matches[0]),
        _ => Lookup::Ambiguous(matches),
    }
}

/// Parses a cluster such as `Tpg4` (the text after `-`).
fn short_cluster(
    prog: &str,
    cluster: &str,
    args: &[String],
    i: &mut usize,
    found: &mut Vec<Found>,
) -> Result<(), UsageError> {
    for (pos, c) in cluster.char_indices() {
        let Some(spec) = SHORTOPTS.find(c).filter(|_| c != ':') else {
            return Err(err(format!("{prog}: invalid option -- '{c}'")));
        };
        let takes_arg = SHORTOPTS[spec + c.len_utf8()..].starts_with(':');
        if !takes_arg {
            found.push((c, None));
            continue;
        }
        let rest = &cluster[pos + c.len_utf8()..];
        if !rest.is_empty() {
            found.push((c, Some(rest.to_string())));
        } else if let Some(v) = args.get(*i) {
            *i += 1;
            found.push((c, Some(v.clone())));
        } else {
            return Err(err(format!("{prog}: option requires an argument -- '{c}'")));
        }
        return Ok(());
    }
    Ok(())
}

/// C `atoi` as glibc implements it: `(int) strtol(s, NULL, 10)`: leading
/// white space, an optional sign, digits up to the first non-digit; the
/// `long` saturates and the conversion to `int` wraps (so `4294967297` is 1,
/// exactly what rt-tests computes).
pub fn atoi(s: &str) -> i32 {
    let t = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut v: i64 = 0;
    let mut saturated = false;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        match v
            .checked_mul(10)
            .and_then(|x| x.checked_add(i64::from(b - b'0')))
        {
            Some(x) => v = x,
            None => {
                saturated = true;
                break;
            }
        }
    }
    let long = match (saturated, neg) {
        (true, false) => i64::MAX,
        (true, true) => i64::MIN,
        (false, true) => -v,
        (false, false) => v,
    };
    long as i32
}

/// Accumulates options in command-line order (later ones win, as in C).
#[derive(Default)]
struct Builder {
    params: RawParams,
    repeat: Option<u64>,
    duration: Option<Duration>,
    json: Option<JsonTarget>,
}

/// Parameters before defaults are applied.
#[derive(Default)]
struct RawParams {
    groups: Option<u32>,
    fds: Option<u32>,
    loops: Option<u32>,
    datasize: Option<u32>,
    threads: bool,
    transport_pipe: bool,
    transport_inet: bool,
    fifo: bool,
}

impl Builder {
    fn apply(&mut self, prog: &str, code: char, value: Option<&str>) -> Result<(), UsageError> {
        let v = value.unwrap_or("");
        let p = &mut self.params;
        match code {
            'f' => p.fds = Some(positive(prog, "--fds|-f", v)?),
            'g' => p.groups = Some(positive(prog, "--groups|-g", v)?),
            'l' => p.loops = Some(positive(prog, "--loops|-l", v)?),
            's' => p.datasize = Some(positive(prog, "--datasize|-s", v)?),
            'F' => p.fifo = true,
            'p' => p.transport_pipe = true,
            'i' => p.transport_inet = true,
            'T' => p.threads = true,
            'P' => p.threads = false,
            CODE_REPEAT => self.repeat = Some(u64::from(positive(prog, "--repeat", v)?)),
            CODE_DURATION => self.duration = Some(seconds(prog, v)?),
            CODE_JSON => self.json = Some(json_target(prog, v)?),
            _ => return Err(err(String::new())),
        }
        Ok(())
    }

    /// The old form `<num groups> [process|thread] [loops]`.
    fn positional(&mut self, prog: &str, args: &[String]) -> Result<(), UsageError> {
        let mut it = args.iter();
        if let Some(g) = it.next() {
            self.params.groups = Some(strict_positive(prog, "<num groups>", g)?);
        }
        if let Some(m) = it.next() {
            self.params.threads = match m.as_str() {
                "process" => false,
                "thread" => true,
                _ => {
                    return Err(err(format!(
                        "{prog}: positional mode must be 'process' or 'thread', not '{m}'"
                    )))
                }
            };
        }
        if let Some(l) = it.next() {
            self.params.loops = Some(strict_positive(prog, "<loops>", l)?);
        }
        if let Some(extra) = it.next() {
            return Err(err(format!("{prog}: unexpected argument '{extra}'")));
        }
        Ok(())
    }

    fn finish(self) -> Options {
        let p = self.params;
        let d = Params::default();
        Options {
            params: Params {
                groups: p.groups.unwrap_or(d.groups),
                fds: p.fds.unwrap_or(d.fds),
                loops: p.loops.unwrap_or(d.loops),
                datasize: p.datasize.unwrap_or(d.datasize),
                mode: if p.threads {
                    Mode::Thread
                } else {
                    Mode::Process
                },
                transport: if p.transport_pipe {
                    Transport::Pipe
                } else if p.transport_inet {
                    Transport::Inet
                } else {
                    Transport::Socket
                },
                fifo: p.fifo,
            },
            repeat: self.repeat,
            duration: self.duration,
            json: self.json,
        }
    }
}

/// rt-tests' check: `atoi(optarg) > 0`, with its message.
fn positive(prog: &str, what: &str, v: &str) -> Result<u32, UsageError> {
    let n = atoi(v);
    u32::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| err(format!("{prog}: {what} requires an integer > 0")))
}

/// Positional numbers are new to 2.x syntax, so they are checked strictly:
/// `6x` is a typo, not 6.
fn strict_positive(prog: &str, what: &str, v: &str) -> Result<u32, UsageError> {
    v.parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| err(format!("{prog}: {what} requires an integer > 0, not '{v}'")))
}

fn seconds(prog: &str, v: &str) -> Result<Duration, UsageError> {
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            err(format!(
                "{prog}: --duration requires a number of seconds > 0"
            ))
        })
}

fn json_target(prog: &str, v: &str) -> Result<JsonTarget, UsageError> {
    match v {
        "" => Err(err(format!("{prog}: --json requires a file name or -"))),
        "-" => Ok(JsonTarget::Stdout),
        path => Ok(JsonTarget::File(PathBuf::from(path))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Command, UsageError> {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse("hb", &v)
    }

    fn params(args: &[&str]) -> Params {
        match run(args) {
            Ok(Command::Run(o)) => o.params,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn msg(args: &[&str]) -> String {
        run(args).expect_err("must fail").message
    }

    #[test]
    fn defaults_are_rt_tests_defaults() {
        let p = params(&[]);
        assert_eq!((p.groups, p.fds, p.loops, p.datasize), (10, 20, 100, 100));
        assert_eq!(p.mode, Mode::Process);
        assert_eq!(p.transport, Transport::Socket);
        assert!(!p.fifo);
    }

    #[test]
    fn short_long_clustered_and_prefixed_forms() {
        let p = params(&["-g4", "-f", "3", "--loops=7", "--datasize", "9", "-TpF"]);
        assert_eq!((p.groups, p.fds, p.loops, p.datasize), (4, 3, 7, 9));
        assert_eq!(
            (p.mode, p.transport, p.fifo),
            (Mode::Thread, Transport::Pipe, true)
        );
        assert_eq!(params(&["-T", "--process"]).mode, Mode::Process);
        assert_eq!(params(&["-T", "--pr"]).mode, Mode::Process);
        assert_eq!(params(&["--d", "5"]).datasize, 5);
        assert_eq!(params(&["--in"]).transport, Transport::Inet);
        assert_eq!(params(&["-Tg", "2"]).groups, 2);
        assert_eq!(params(&["--groups=2"]).groups, 2);
    }

    #[test]
    fn later_options_win_and_permutation_works() {
        assert_eq!(params(&["-g", "2", "-g", "3"]).groups, 3);
        assert_eq!(params(&["-P", "-T"]).mode, Mode::Thread);
        let p = params(&["5", "-f", "2"]);
        assert_eq!((p.groups, p.fds), (5, 2));
    }

    #[test]
    fn atoi_matches_glibc() {
        assert_eq!(atoi("12"), 12);
        assert_eq!(atoi(" +7x"), 7);
        assert_eq!(atoi("-3"), -3);
        assert_eq!(atoi("abc"), 0);
        assert_eq!(atoi(""), 0);
        assert_eq!(atoi("4294967297"), 1);
        assert_eq!(atoi("99999999999999999999999"), -1);
    }

    #[test]
    fn value_errors_use_rt_tests_wording() {
        for (opt, name) in [
            ("-f", "--fds|-f"),
            ("-g", "--groups|-g"),
            ("-l", "--loops|-l"),
            ("-s", "--datasize|-s"),
        ] {
            for bad in ["0", "-3", "x", ""] {
                assert_eq!(
                    msg(&[opt, bad]),
                    format!("hb: {name} requires an integer > 0")
                );
            }
        }
        assert_eq!(
            msg(&["-p", "-i"]),
            "hb: --pipe|-p and --inet|-i cannot be used together"
        );
    }

    #[test]
    fn getopt_errors_use_glibc_wording() {
        assert_eq!(msg(&["-x"]), "hb: invalid option -- 'x'");
        assert_eq!(msg(&["-:"]), "hb: invalid option -- ':'");
        assert_eq!(msg(&["-g"]), "hb: option requires an argument -- 'g'");
        assert_eq!(msg(&["--foo=3"]), "hb: unrecognized option '--foo=3'");
        assert_eq!(
            msg(&["--pipe=1"]),
            "hb: option '--pipe' doesn't allow an argument"
        );
        assert_eq!(
            msg(&["--pi=1"]),
            "hb: option '--pipe' doesn't allow an argument"
        );
        assert_eq!(msg(&["--gr"]), "hb: option '--groups' requires an argument");
        assert_eq!(
            msg(&["--p"]),
            "hb: option '--p' is ambiguous; possibilities: '--pipe' '--processes'"
        );
        assert_eq!(
            msg(&["--f=2"]),
            "hb: option '--f=2' is ambiguous; possibilities: '--fds' '--fifo'"
        );
    }

    #[test]
    fn help_wins_and_double_dash_ends_options() {
        assert_eq!(run(&["-g", "2", "-h"]), Ok(Command::Help));
        assert_eq!(run(&["--he"]), Ok(Command::Help));
        assert!(
            run(&["--", "-g"]).is_err(),
            "-g after -- is a positional, not a number"
        );
        assert_eq!(params(&["--", "3"]).groups, 3);
    }

    #[test]
    fn old_positional_forms() {
        assert_eq!(params(&["6"]).groups, 6);
        let p = params(&["-pipe", "6", "thread", "50"]);
        assert_eq!(
            (p.groups, p.mode, p.loops, p.transport),
            (6, Mode::Thread, 50, Transport::Pipe)
        );
        assert!(msg(&["6x"]).contains("<num groups> requires an integer > 0"));
        assert!(msg(&["6", "threads"]).contains("'process' or 'thread'"));
        assert!(msg(&["6", "process", "1", "2"]).contains("unexpected argument '2'"));
    }

    #[test]
    fn extensions() {
        let o = match run(&["--repeat", "3", "--dur=1.5", "--json=-", "--d", "8"]) {
            Ok(Command::Run(o)) => o,
            other => panic!("{other:?}"),
        };
        assert_eq!(o.repeat, Some(3));
        assert_eq!(o.duration, Some(Duration::from_millis(1500)));
        assert_eq!(o.json, Some(JsonTarget::Stdout));
        assert_eq!(o.params.datasize, 8);
        assert_eq!(
            msg(&["--repeat", "0"]),
            "hb: --repeat requires an integer > 0"
        );
        assert_eq!(
            msg(&["--duration", "-1"]),
            "hb: --duration requires a number of seconds > 0"
        );
        assert_eq!(msg(&["--json="]), "hb: --json requires a file name or -");
    }

    /// A trial's load is started with the schema's `HackbenchArgs::to_args`:
    /// this parser reads back every parameter it wrote, the backstop and
    /// the report's path.
    #[test]
    fn the_trials_command_line_parses_back_to_its_parameters() {
        use xrunbench_schema::trial::{HackbenchArgs, HackbenchMode, HackbenchTransport};
        let asks = [
            HackbenchArgs::default(),
            HackbenchArgs {
                groups: 6,
                fds: 3,
                loops: 2000,
                datasize: 512,
                mode: HackbenchMode::Thread,
                transport: HackbenchTransport::Pipe,
            },
            HackbenchArgs {
                transport: HackbenchTransport::Inet,
                ..HackbenchArgs::default()
            },
        ];
        let json = std::path::Path::new("/dev/shm/load.json");
        for ask in asks {
            let args = ask.to_args(75, json);
            let Ok(Command::Run(o)) = parse("hb", &args) else {
                panic!("{args:?} does not parse as a run");
            };
            let p = &o.params;
            assert_eq!(
                (p.groups, p.fds, p.loops, p.datasize),
                (ask.groups, ask.fds, ask.loops, ask.datasize),
                "{args:?}"
            );
            let mode = match ask.mode {
                HackbenchMode::Process => Mode::Process,
                HackbenchMode::Thread => Mode::Thread,
            };
            let transport = match ask.transport {
                HackbenchTransport::Socket => Transport::Socket,
                HackbenchTransport::Pipe => Transport::Pipe,
                HackbenchTransport::Inet => Transport::Inet,
            };
            assert_eq!((p.mode, p.transport, p.fifo), (mode, transport, false));
            assert_eq!(o.duration, Some(Duration::from_secs(75)), "{args:?}");
            assert_eq!(o.json, Some(JsonTarget::File(json.to_path_buf())));
            assert_eq!(o.repeat, None);
        }
    }
}
