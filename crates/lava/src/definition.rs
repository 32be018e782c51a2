//! The LAVA test definition and the job snippet `cargo xtask lava` writes.
//!
//! The definition carries everything the board needs: the trial specs the
//! host made (in plan order, interleaved as `run` does), the limit gates,
//! and the scenario itself; a LAVA job runs it with no host in the loop.
//! Its one step writes a shell script and runs it; the script gets the
//! board binaries (a URL, a directory, or PATH), runs each trial with
//! `xrun-trial run`, prints each record into the job log (base64 lines,
//! which `lava-results` reads back), and reports `xrun-trial summarize`'s
//! lines as `lava-test-case NAME --result R --measurement M --units U`.
//! A trial that cannot run ends the test with `lava-test-raise`.

use std::fmt::Write as _;

use serde_json::{json, Value};
use xrunbench_schema::gate::{GateSet, GATES_SCHEMA};
use xrunbench_schema::trial::AudioInput;

use xrunbench_analysis::gate::{self, Gate};
use xrunbench_scenario::plan::{make_plan, PlannedTrial};
use xrunbench_scenario::spec::trial_spec;
use xrunbench_scenario::{AudioSource, Scenario, ScenarioFile};

/// The format line LAVA requires in `metadata`.
pub const FORMAT: &str = "Lava-Test Test Definition 1.0";
/// Heredoc delimiter of the documents inside the script.
const DOC_END: &str = "XRUNBENCH_DOC";
/// Heredoc delimiter of the script inside the step.
const SCRIPT_END: &str = "XRUNBENCH_SCRIPT";
/// What a line of the job log starts with when it carries a document
/// (`xrunbench-doc KIND NAME BASE64`), and the line that closes one
/// (`xrunbench-doc-end KIND NAME BYTES`).
pub const DOC_LINE: &str = "xrunbench-doc";
/// See [`DOC_LINE`].
pub const DOC_END_LINE: &str = "xrunbench-doc-end";
/// Seconds a trial needs beyond warm-up and duration on a board: start,
/// the machine lock, restoring.
const TRIAL_OVERHEAD_S: f64 = 30.0;

/// What `cargo xtask lava` writes.
pub struct Generated {
    /// The test definition (YAML).
    pub definition: String,
    /// A job for a board reached over SSH with the definition inlined.
    pub job: String,
    /// The definition's name (`xrunbench-<scenario>`).
    pub name: String,
    /// Trials the definition runs.
    pub trials: usize,
}

/// Options of the generated files.
pub struct Options<'a> {
    /// Where the board downloads its binaries from (`URL/<arch>/xrun-trial`).
    pub binaries_url: Option<&'a str>,
    /// The shell prompt the job's `boot` waits for (a regex).
    pub prompt: &'a str,
}

/// The definition and job of a scenario; an error is one line (audio files
/// are the host's: a board in a farm has no host to copy them from).
pub fn generate(
    file: &ScenarioFile,
    scenario: &Scenario,
    gates: &[Gate],
    opts: &Options<'_>,
) -> Result<Generated, String> {
    for c in &scenario.configs {
        if let AudioSource::File(p) = &c.audio.source {
            return Err(format!(
                "{}: config `{}`: audio file {}: a LAVA board has no host to copy it from; \
                 use `generate = {{ … }}` in [audio]",
                scenario.path.display(),
                c.name,
                p.display()
            ));
        }
    }
    let names: Vec<String> = scenario.configs.iter().map(|c| c.name.clone()).collect();
    let plan = make_plan(&names, scenario.trials, scenario.order);
    let name = format!("xrunbench-{}", scenario.name);
    let script = script(file, scenario, gates, &plan)?;
    let definition = definition_value(&name, scenario, &script, opts);
    let job = job_value(&name, scenario, &plan, &definition, opts);
    Ok(Generated {
        definition: super::yaml::to_yaml(&definition),
        job: super::yaml::to_yaml(&job),
        name,
        trials: plan.len(),
    })
}

fn definition_value(name: &str, s: &Scenario, script: &str, opts: &Options<'_>) -> Value {
    let description = if s.description.is_empty() {
        format!("xrunbench scenario {}", s.name)
    } else {
        format!("xrunbench scenario {}: {}", s.name, s.description)
    };
    json!({
        "metadata": {
            "format": FORMAT,
            "name": name,
            "description": description,
        },
        "params": {
            "XRUNBENCH_BINARIES_URL": opts.binaries_url.unwrap_or(""),
            "XRUNBENCH_BIN_DIR": "",
            "XRUNBENCH_RECORDS_DIR": "",
        },
        "run": {
            "steps": [
                format!("cat > xrunbench-run.sh <<'{SCRIPT_END}'\n{script}{SCRIPT_END}\n"),
                // LAVA sets the params as shell variables of its own
                // script: the one we run needs them exported.
                "export XRUNBENCH_BINARIES_URL XRUNBENCH_BIN_DIR XRUNBENCH_RECORDS_DIR; sh ./xrunbench-run.sh",
            ]
        }
    })
}

/// Minutes for the whole test: every trial with its overhead, twice, and
/// five more for the binaries.
pub fn test_minutes(s: &Scenario, trials: usize) -> u64 {
    let per = s.warmup.as_secs_f64() + s.duration.as_secs_f64() + TRIAL_OVERHEAD_S;
    (2.0 * per * trials as f64 / 60.0).ceil() as u64 + 5
}

fn job_value(
    name: &str,
    s: &Scenario,
    plan: &[PlannedTrial],
    definition: &Value,
    opts: &Options<'_>,
) -> Value {
    let test = test_minutes(s, plan.len());
    json!({
        "device_type": "ssh",
        "job_name": name,
        "timeouts": {
            "job": {"minutes": test + 10},
            "action": {"minutes": test},
            "connection": {"minutes": 2},
        },
        "priority": "medium",
        "visibility": "public",
        "actions": [
            {"deploy": {"to": "ssh", "os": "debian", "timeout": {"minutes": 2}}},
            {"boot": {
                "method": "ssh",
                "connection": "ssh",
                "prompts": [opts.prompt],
                "timeout": {"minutes": 2},
            }},
            {"test": {
                "timeout": {"minutes": test},
                "definitions": [{
                    "from": "inline",
                    "name": name,
                    "path": format!("inline/{name}.yaml"),
                    "repository": definition,
                }],
            }},
        ],
    })
}

/// A heredoc writing `text` (one line of JSON) to `path` on the board.
fn heredoc(out: &mut String, path: &str, text: &str) {
    let _ = writeln!(out, "cat > \"{path}\" <<'{DOC_END}'\n{text}\n{DOC_END}");
}

/// The script the definition's step runs on the board.
pub fn script(
    file: &ScenarioFile,
    s: &Scenario,
    gates: &[Gate],
    plan: &[PlannedTrial],
) -> Result<String, String> {
    // The board is LAVA's: the scenario's own [target] does not apply.
    let mut file = file.clone();
    file.target = None;
    let gate_set = GateSet {
        schema: GATES_SCHEMA.into(),
        gates: gate::limits(gates),
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# xrunbench: scenario `{}`, {} trial(s) of {} s, generated by `{} lava`.",
        s.name,
        plan.len(),
        s.duration.as_secs_f64(),
        xrunbench_lab::util::invocation()
    );
    out.push_str(PRELUDE);
    heredoc(&mut out, "$work/scenario.json", &compact(&file)?);
    heredoc(&mut out, "$work/gates.json", &compact(&gate_set)?);
    for p in plan {
        let config = &s.configs[p.config];
        let AudioSource::Generate(tone) = &config.audio.source else {
            return Err(format!("config `{}`: not a generated tone", config.name));
        };
        let spec = trial_spec(s, p, AudioInput::Tone(tone.clone()), None);
        heredoc(
            &mut out,
            &format!("$work/specs/{}.json", p.stem()),
            &compact(&spec)?,
        );
    }
    let _ = writeln!(out, "print_doc scenario {} \"$work/scenario.json\"", s.name);
    let stems: Vec<String> = plan.iter().map(PlannedTrial::stem).collect();
    let _ = writeln!(out, "for stem in {}; do", stems.join(" "));
    out.push_str(TRIAL_LOOP);
    let records: Vec<String> = stems
        .iter()
        .map(|st| format!("\"$records/{st}.json\""))
        .collect();
    let _ = writeln!(
        out,
        "\"$bin/xrun-trial\" summarize --gates \"$work/gates.json\" {} > \"$work/summary.txt\" \\\n    || raise \"xrun-trial summarize failed\"",
        records.join(" ")
    );
    out.push_str(REPORT);
    Ok(out)
}

/// A document the script carries, as one line of JSON.
fn compact<T: serde::Serialize>(v: &T) -> Result<String, String> {
    serde_json::to_string(v).map_err(|e| format!("serializing: {e}"))
}

/// The script up to the documents: helpers, directories, binaries.
const PRELUDE: &str = r#"# It runs the trials with xrun-trial on this board, no host in the loop.
set -u
say() { echo "xrunbench: $*"; }
raise() {
    say "$*" >&2
    if command -v lava-test-raise >/dev/null 2>&1; then lava-test-raise "xrunbench: $*"; fi
    exit 1
}
# print_doc KIND NAME FILE: FILE into the job log as base64 lines, which
# `cargo xtask lava-results` reads back.
print_doc() {
    base64 < "$3" | sed "s/^/xrunbench-doc $1 $2 /"
    echo "xrunbench-doc-end $1 $2 $(wc -c < "$3")"
}
work="$(pwd)/xrunbench"
records="${XRUNBENCH_RECORDS_DIR:-$work/records}"
mkdir -p "$work/specs" "$records" || raise "cannot create $work and $records"
# The board binaries: from XRUNBENCH_BINARIES_URL (URL/<arch>/xrun-trial, as
# `cargo xtask board build --out DIR` lays them out), else in
# XRUNBENCH_BIN_DIR, else xrun-trial on PATH.
bin="${XRUNBENCH_BIN_DIR:-}"
url="${XRUNBENCH_BINARIES_URL:-}"
if [ -n "$url" ]; then
    case "$(uname -m)" in
        aarch64|arm64) arch=aarch64 ;;
        armv7l|armv7|armv8l|arm) arch=armv7 ;;
        x86_64|amd64) arch=x86_64 ;;
        *) raise "no board binaries for $(uname -m)" ;;
    esac
    bin="$work/bin"
    mkdir -p "$bin"
    for b in xrun-trial xrun-player xrun-hackbench; do
        if command -v curl >/dev/null 2>&1; then
            curl -fsSL -o "$bin/$b" "$url/$arch/$b" || raise "cannot download $url/$arch/$b"
        else
            wget -q -O "$bin/$b" "$url/$arch/$b" || raise "cannot download $url/$arch/$b"
        fi
        chmod +x "$bin/$b"
    done
elif [ -z "$bin" ]; then
    found=$(command -v xrun-trial) \
        || raise "xrun-trial not found: set XRUNBENCH_BINARIES_URL or XRUNBENCH_BIN_DIR"
    bin=$(dirname "$found")
fi
[ -x "$bin/xrun-trial" ] || raise "$bin/xrun-trial is not an executable"
# Knobs a killed trial left changed go back before anything reads them.
"$bin/xrun-trial" restore || raise "xrun-trial restore failed"
"#;

/// The body of the loop over the plan's trial stems.
const TRIAL_LOOP: &str = r#"    say "trial $stem"
    "$bin/xrun-trial" run "$work/specs/$stem.json" > "$records/$stem.json"
    status=$?
    if [ -s "$records/$stem.json" ]; then print_doc record "$stem" "$records/$stem.json"; fi
    [ "$status" -eq 0 ] || raise "trial $stem could not run (xrun-trial exit $status)"
done
"#;

/// One `lava-test-case` per summary line (printed when not under LAVA).
const REPORT: &str = r#"while read -r name result measurement units; do
    if command -v lava-test-case >/dev/null 2>&1; then
        lava-test-case "$name" --result "$result" --measurement "$measurement" --units "$units"
    else
        echo "$name $result $measurement $units"
    fi
done < "$work/summary.txt"
"#;
