//! What a bisected tree may not change: a bisection checks out commits
//! nobody has read yet, and its scenario may live in that tree. Whatever in
//! the scenario runs commands on the host (`deploy`, `expect_kernel`,
//! `power_cycle`, ssh options such as `ProxyCommand`), chooses where the
//! host connects or boots (the board, the VM, the LAVA lab) or where a
//! secret goes (the lab's URL and token file) is taken as it was when the
//! bisection started: from the command line, or the scenario as read then.
//!
//! The rule is the whole target, not a list of dangerous keys: the board
//! as resolved (every key of `[target]` and of `[target] vm`), the lab a
//! step would use (URL, job file and its contents, devices, token file),
//! the commands a step would run, and the target's kind. A commit whose
//! scenario differs in any of it is refused (skipped, 125), and nothing of
//! it runs — so a key added to `[target]` later is covered without a
//! change here.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::deploy::DeployArgs;
use xrunbench_scenario::lava::LavaTargetArgs;
use xrunbench_scenario::Scenario;

/// The largest job file whose contents are held to the bisection's start;
/// a LAVA job definition is a few KB.
const JOB_FILE_MAX: usize = 1 << 20;

/// Where a step's trials run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    /// This machine.
    #[default]
    Local,
    /// A board over SSH.
    Ssh,
    /// A guest of the VM lab.
    Vm,
    /// Jobs of a LAVA lab.
    Lava,
}

/// The lab a step submits its jobs to, with the user's token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabHooks {
    /// The server: the token goes there.
    pub url: String,
    /// The job file.
    pub job: Option<PathBuf>,
    /// The job file's SHA-256 (its deploy and boot actions run in the
    /// lab); `None`: it cannot be read now.
    pub job_sha256: Option<String>,
    /// How many jobs at once.
    pub devices: usize,
    /// Where the token is read from (else the environment).
    pub token_file: Option<PathBuf>,
}

/// The host-facing part of a scenario, as a step would use it (the
/// command line's options over the scenario's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostHooks {
    /// Where the trials run.
    pub kind: TargetKind,
    /// The board as resolved, every key (`[target]`, `--target`).
    pub target: Option<serde_json::Value>,
    /// The lab (`--lava`, else `[target] lava`).
    pub lab: Option<LabHooks>,
    /// The deploy command a step runs.
    pub deploy: Option<String>,
    /// The expected-kernel command a step runs.
    pub expect_kernel: Option<String>,
    /// How often a step's infrastructure failure is retried.
    pub retries: u32,
}

impl Default for HostHooks {
    /// This machine, nothing run on the host.
    fn default() -> Self {
        HostHooks {
            kind: TargetKind::Local,
            target: None,
            lab: None,
            deploy: None,
            expect_kernel: None,
            retries: xrunbench_scenario::DEFAULT_RETRIES,
        }
    }
}

impl HostHooks {
    /// The hooks `s` (target options already applied) would run with
    /// `deploy` and `lava` from the command line.
    pub fn of(s: &Scenario, deploy: &DeployArgs, lava: &LavaTargetArgs) -> HostHooks {
        let lab = s.lava_lab(lava).map(|l| lab_hooks(&l));
        let kind = match (&lab, &s.target) {
            (Some(_), _) => TargetKind::Lava,
            (None, Some(t)) if t.vm.is_some() => TargetKind::Vm,
            (None, Some(_)) => TargetKind::Ssh,
            (None, None) => TargetKind::Local,
        };
        let commands = super::deploy::StepCommands::of(s, deploy);
        HostHooks {
            kind,
            target: s
                .target
                .as_ref()
                .map(|t| serde_json::to_value(t).expect("a target serialises")),
            lab,
            deploy: commands.deploy,
            expect_kernel: commands.expect_kernel,
            retries: commands
                .retries
                .unwrap_or(xrunbench_scenario::DEFAULT_RETRIES),
        }
    }

    /// The names of what differs from `trusted`, as the scenario spells
    /// them, each once.
    pub fn differences(&self, trusted: &HostHooks) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut add = |name: String| {
            if !out.contains(&name) {
                out.push(name);
            }
        };
        if self.kind != trusted.kind {
            // What else differs follows from it.
            return vec![format!(
                "the target's kind ({} instead of {})",
                kind_name(self.kind),
                kind_name(trusted.kind)
            )];
        }
        for key in target_keys_differing(self.target.as_ref(), trusted.target.as_ref()) {
            add(key);
        }
        if self.lab != trusted.lab {
            add(lab_difference(self.lab.as_ref(), trusted.lab.as_ref()));
        }
        if self.deploy != trusted.deploy {
            add("deploy".into());
        }
        if self.expect_kernel != trusted.expect_kernel {
            add("expect_kernel".into());
        }
        if self.retries != trusted.retries {
            add("retries".into());
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
             refused, nothing of it runs (what runs on the host, where it connects and where a \
             token goes come from the command line or the scenario as read at the start)",
            scenario.display(),
            differ.join(", ")
        ))
    }

    /// These hooks with every path under `from` moved under `to` (a
    /// worktree standing for the tree); unchanged when they are the same.
    pub fn moved(self, from: &Path, to: &Path) -> HostHooks {
        if from == to {
            return self;
        }
        let mut v = serde_json::to_value(&self).expect("hooks serialise");
        move_paths(&mut v, from, to);
        serde_json::from_value(v).unwrap_or(self)
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

/// Every string of `v` that is a path under `from`, under `to` instead.
fn move_paths(v: &mut serde_json::Value, from: &Path, to: &Path) {
    match v {
        serde_json::Value::String(s) => {
            if let Ok(rest) = Path::new(s.as_str()).strip_prefix(from) {
                *s = to.join(rest).display().to_string();
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| move_paths(x, from, to)),
        serde_json::Value::Object(o) => o.values_mut().for_each(|x| move_paths(x, from, to)),
        _ => {}
    }
}

fn kind_name(k: TargetKind) -> &'static str {
    match k {
        TargetKind::Local => "this machine",
        TargetKind::Ssh => "an ssh board",
        TargetKind::Vm => "a vm",
        TargetKind::Lava => "a LAVA lab",
    }
}

/// The lab `l` names, with its job file's digest.
fn lab_hooks(l: &LavaTargetArgs) -> LabHooks {
    LabHooks {
        url: l.lava.clone().unwrap_or_default(),
        job: l.lava_job.clone(),
        job_sha256: l.lava_job.as_deref().and_then(job_digest),
        devices: l.lava_devices,
        token_file: l.lava_token_file.clone(),
    }
}

/// The SHA-256 of a job file: a regular file of at most
/// [`JOB_FILE_MAX`] bytes (it may be in the tree).
fn job_digest(path: &Path) -> Option<String> {
    let bytes = xrunbench_schema::bounded::read_regular(path, JOB_FILE_MAX).ok()?;
    Some(format!("{:x}", Sha256::digest(&bytes)))
}

/// Which of the lab's keys differ, named as `[target] lava` spells them.
fn lab_difference(now: Option<&LabHooks>, trusted: Option<&LabHooks>) -> String {
    match (now, trusted) {
        (Some(n), Some(t)) => {
            let keys: Vec<&str> = [
                ("lava.url", n.url != t.url),
                ("lava.job", n.job != t.job || n.job_sha256 != t.job_sha256),
                ("lava.devices", n.devices != t.devices),
                ("lava.token_file", n.token_file != t.token_file),
            ]
            .into_iter()
            .filter_map(|(k, d)| d.then_some(k))
            .collect();
            format!("the LAVA lab ({})", keys.join(", "))
        }
        (Some(n), None) => format!("the LAVA lab (adds {})", n.url),
        _ => "the LAVA lab (drops it)".into(),
    }
}

/// The keys of the resolved board that differ, as `[target]` spells them.
fn target_keys_differing(
    now: Option<&serde_json::Value>,
    trusted: Option<&serde_json::Value>,
) -> Vec<String> {
    differing_keys(now, trusted)
        .into_iter()
        .map(|k| match k.as_str() {
            "destination" => "the board (ssh)".to_string(),
            "options" => "ssh options".to_string(),
            "vm" => {
                let field = |v: Option<&serde_json::Value>| v.and_then(|v| v.get("vm")).cloned();
                let (n, t) = (field(now), field(trusted));
                let keys: Vec<String> = differing_keys(n.as_ref(), t.as_ref())
                    .iter()
                    .map(|k| format!("vm.{k}"))
                    .collect();
                format!("the vm ({})", keys.join(", "))
            }
            other => other.to_string(),
        })
        .collect()
}

/// The keys of two JSON objects (absent: no keys) whose values differ,
/// sorted.
fn differing_keys(
    now: Option<&serde_json::Value>,
    trusted: Option<&serde_json::Value>,
) -> Vec<String> {
    let empty = serde_json::Map::new();
    let n = now.and_then(|v| v.as_object()).unwrap_or(&empty);
    let t = trusted.and_then(|v| v.as_object()).unwrap_or(&empty);
    let mut keys: Vec<String> = n
        .keys()
        .chain(t.keys())
        .filter(|k| n.get(*k) != t.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use xrunbench_lab::lab::vm::VmSpec;
    use xrunbench_scenario::{self as scenario, LavaSpec, TargetSpec};

    const HEAD: &str =
        "name = \"t\"\nduration = \"1s\"\n[audio]\ngenerate = {}\n[[config]]\nname = \"a\"\n";
    const SSH: &str = "ssh = \"root@board.lab\"\n";
    const VM: &str = "vm = { kernel = \"bzImage\" }\n";
    const LAVA: &str = "lava = { url = \"http://127.0.0.1:9/\", job = \"job.yaml\" }\n";

    /// A directory holding every file a `[target]` key may name.
    fn files() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for f in [
            "bzImage",
            "bzImage2",
            "id",
            "kh",
            "job.yaml",
            "job2.yaml",
            "token",
        ] {
            std::fs::write(d.path().join(f), f).unwrap();
        }
        std::fs::create_dir_all(d.path().join("mods")).unwrap();
        std::fs::write(d.path().join("mods/modules.dep"), "").unwrap();
        // The lab's default card, built in.
        std::fs::write(
            d.path().join("mods/modules.builtin"),
            "kernel/sound/drivers/snd-dummy.ko\n",
        )
        .unwrap();
        d
    }

    /// The hooks of a scenario whose `[target]` is `target`, with `deploy`
    /// and `lava` from the command line.
    fn hooks_with(
        dir: &Path,
        target: &str,
        deploy: &DeployArgs,
        lava: &LavaTargetArgs,
    ) -> HostHooks {
        let path = dir.join("s.toml");
        let text = match target {
            "" => HEAD.to_string(),
            t => format!("{HEAD}[target]\n{t}"),
        };
        std::fs::write(&path, text).unwrap();
        let (_, s) = scenario::load(&path).unwrap_or_else(|e| panic!("{target}: {}", e.0));
        HostHooks::of(&s, deploy, lava)
    }

    fn hooks(dir: &Path, target: &str) -> HostHooks {
        hooks_with(
            dir,
            target,
            &DeployArgs::default(),
            &LavaTargetArgs::default(),
        )
    }

    /// The fields of a `deny_unknown_fields` type, as serde names them
    /// when refusing an unknown one.
    fn fields_of<T: serde::de::DeserializeOwned + std::fmt::Debug>() -> Vec<String> {
        let e = serde_json::from_str::<T>(r#"{"~unknown~": 0}"#)
            .unwrap_err()
            .to_string();
        let list = e.split("expected ").nth(1).unwrap_or_else(|| panic!("{e}"));
        list.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    /// For every key of `[target]`, `[target] vm` and `[target] lava`:
    /// the target it is changed on, and that target with it changed.
    /// Whatever key exists must have a case here, so one added later is
    /// covered or this table fails the test below.
    fn cases() -> Vec<(&'static str, &'static str, String)> {
        let ssh = |extra: &str| format!("{SSH}{extra}\n");
        let vm = |inner: &str| format!("vm = {{ kernel = \"bzImage\", {inner} }}\n");
        let lava = |inner: &str| {
            format!("lava = {{ url = \"http://127.0.0.1:9/\", job = \"job.yaml\", {inner} }}\n")
        };
        vec![
            ("ssh", SSH, "ssh = \"root@elsewhere.lab\"\n".into()),
            ("vm", SSH, VM.into()),
            ("lava", SSH, LAVA.into()),
            ("port", SSH, ssh("port = 2222")),
            ("identity", SSH, ssh("identity = \"id\"")),
            ("known_hosts", SSH, ssh("known_hosts = \"kh\"")),
            ("options", SSH, ssh("options = [\"ServerAliveInterval=1\"]")),
            ("workdir", SSH, ssh("workdir = \"elsewhere\"")),
            ("arch", SSH, ssh("arch = \"aarch64\"")),
            ("connect_timeout", SSH, ssh("connect_timeout = \"20s\"")),
            ("trial_timeout", SSH, ssh("trial_timeout = \"900s\"")),
            ("retries", SSH, ssh("retries = 7")),
            (
                "reconnect_timeout",
                SSH,
                ssh("reconnect_timeout = \"200s\""),
            ),
            ("power_cycle", SSH, ssh("power_cycle = \"touch /tmp/x\"")),
            ("deploy", SSH, ssh("deploy = \"touch /tmp/x\"")),
            ("boot_timeout", SSH, ssh("boot_timeout = \"900s\"")),
            ("expect_kernel", SSH, ssh("expect_kernel = \"echo x\"")),
            (
                "lava.deploy",
                LAVA,
                format!("{LAVA}deploy = \"touch /tmp/x\"\n"),
            ),
            (
                "lava.expect_kernel",
                LAVA,
                format!("{LAVA}expect_kernel = \"echo x\"\n"),
            ),
            ("lava.retries", LAVA, format!("{LAVA}retries = 9\n")),
            ("vm.kernel", VM, "vm = { kernel = \"bzImage2\" }\n".into()),
            ("vm.modules", VM, vm("modules = \"mods\"")),
            ("vm.arch", VM, vm("arch = \"aarch64\"")),
            ("vm.cpus", VM, vm("cpus = 1")),
            ("vm.memory", VM, vm("memory = 512")),
            ("vm.sound", VM, vm("sound = \"hda\"")),
            ("vm.accel", VM, vm("accel = \"tcg\"")),
            ("vm.append", VM, vm("append = \"quiet\"")),
            (
                "lava.url",
                LAVA,
                "lava = { url = \"http://127.0.0.2:9/\", job = \"job.yaml\" }\n".into(),
            ),
            (
                "lava.job",
                LAVA,
                "lava = { url = \"http://127.0.0.1:9/\", job = \"job2.yaml\" }\n".into(),
            ),
            ("lava.devices", LAVA, lava("devices = 2")),
            ("lava.token_file", LAVA, lava("token_file = \"token\"")),
        ]
    }

    #[test]
    fn every_key_of_every_target_kind_is_held_to_the_start() {
        let d = files();
        let cases = cases();
        let keys = [
            ("", fields_of::<TargetSpec>()),
            ("vm.", fields_of::<VmSpec>()),
            ("lava.", fields_of::<LavaSpec>()),
        ];
        for (prefix, fields) in &keys {
            assert!(fields.len() > 3, "{prefix}: {fields:?}");
            for f in fields {
                let key = format!("{prefix}{f}");
                // A token in the scenario is refused when it is read.
                // Debian's kernel by version resolves to the image and
                // modules it names, held as `vm.kernel` and `vm.modules`
                // (resolving one here would fetch a kernel).
                if ["lava.token", "vm.debian", "vm.rt"].contains(&key.as_str()) {
                    continue;
                }
                assert!(
                    cases.iter().any(|(k, _, _)| *k == key),
                    "`[target] {key}` has no case in the trust rule's test: add one"
                );
            }
        }
        for (key, base, changed) in &cases {
            let trusted = hooks(d.path(), base);
            let now = hooks(d.path(), changed);
            let e = now
                .check(&trusted, Path::new("s.toml"))
                .expect_err(&format!("{key}: a changed key was not refused"));
            let name = key.rsplit('.').next().unwrap();
            assert!(
                e.to_lowercase().contains(name) || *key == "ssh" || *key == "lava.url",
                "{key}: {e}"
            );
            assert!(!e.contains('\n'), "{e}");
            // Unchanged, nothing is refused.
            assert_eq!(
                trusted.check(&hooks(d.path(), base), Path::new("s.toml")),
                Ok(())
            );
        }
    }

    #[test]
    fn a_token_in_the_scenario_is_refused_when_it_is_read() {
        let d = files();
        let path = d.path().join("s.toml");
        let lava =
            "lava = { url = \"http://127.0.0.1:9/\", job = \"job.yaml\", token = \"s3cret\" }\n";
        std::fs::write(&path, format!("{HEAD}[target]\n{lava}")).unwrap();
        let e = scenario::load(&path).unwrap_err().0;
        assert!(e.contains("lava.token") && !e.contains("s3cret"), "{e}");
    }

    #[test]
    fn a_job_file_changed_in_place_is_refused() {
        let d = files();
        let trusted = hooks(d.path(), LAVA);
        std::fs::write(d.path().join("job.yaml"), "actions: [hostile]").unwrap();
        let e = hooks(d.path(), LAVA)
            .check(&trusted, Path::new("s.toml"))
            .unwrap_err();
        assert!(e.contains("lava.job"), "{e}");
    }

    #[test]
    fn the_target_kind_may_not_change_between_any_two_kinds() {
        let d = files();
        let kinds = ["", SSH, VM, LAVA];
        for a in kinds {
            for b in kinds.iter().filter(|b| **b != a) {
                let e = hooks(d.path(), b)
                    .check(&hooks(d.path(), a), Path::new("s.toml"))
                    .unwrap_err();
                assert!(e.contains("the target's kind"), "{a:?} -> {b:?}: {e}");
            }
        }
    }

    #[test]
    fn a_lab_table_s_deploy_is_refused_also_under_the_command_line_s_lab() {
        let d = files();
        let lava = LavaTargetArgs {
            lava: Some("http://127.0.0.1:9/".into()),
            lava_job: Some(d.path().join("job.yaml")),
            lava_devices: 1,
            lava_token_file: None,
        };
        let none = DeployArgs::default();
        let trusted = hooks_with(d.path(), "", &none, &lava);
        let tree = format!("{LAVA}deploy = \"touch /tmp/x\"\n");
        let e = hooks_with(d.path(), &tree, &none, &lava)
            .check(&trusted, Path::new("s.toml"))
            .unwrap_err();
        assert!(e.contains("deploy"), "{e}");
        // The tree's lab is not used under --lava, and is not refused for
        // itself; what it would run is.
        let quiet = hooks_with(d.path(), LAVA, &none, &lava);
        assert_eq!(quiet.check(&trusted, Path::new("s.toml")), Ok(()));
    }

    #[test]
    fn a_worktree_stands_for_the_tree_it_was_made_from() {
        let d = files();
        let wt = files();
        let trusted = hooks(d.path(), "vm = { kernel = \"bzImage\" }\n");
        let in_wt = hooks(wt.path(), "vm = { kernel = \"bzImage\" }\n");
        assert!(in_wt.check(&trusted, Path::new("s.toml")).is_err());
        assert_eq!(
            in_wt
                .moved(wt.path(), d.path())
                .check(&trusted, Path::new("s.toml")),
            Ok(())
        );
    }

    #[test]
    fn hooks_written_are_read_back_the_same() {
        let d = files();
        let h = hooks(d.path(), LAVA);
        let p = d.path().join("h.json");
        h.write(&p).unwrap();
        assert_eq!(HostHooks::read(&p).unwrap(), h);
    }
}
