//! Validation of a scenario against the machine that will run it. The
//! host checks what only the host can (the scenario itself, `--only`, the
//! WAV's header before it is copied anywhere); the rest comes from the
//! target (`xrun-trial probe` for the kernel, `xrun-trial check` for
//! knobs, CPUs, priorities, devices). All problems are reported at once,
//! one line each, before anything runs.

use std::path::Path;
use xrunbench_schema::doc::one_line;

use xrunbench_schema::probe::CheckReport;

use crate::{AudioSource, Scenario};

/// Applies `--only` and skips configurations meant for another kernel
/// than `kernel_of` theirs (the target's `uname -r`). Returns the narrowed scenario
/// and one line per configuration skipped.
pub fn narrow(
    mut s: Scenario,
    only: &[String],
    kernel_of: &dyn Fn(&str) -> String,
) -> Result<(Scenario, Vec<String>), Vec<String>> {
    let file = s.path.display().to_string();
    check_only(&s, only)?;
    if !only.is_empty() {
        s.configs.retain(|c| only.contains(&c.name));
    }
    let mut skipped = Vec::new();
    s.configs.retain(|c| match &c.kernel {
        Some(k) if *k != kernel_of(&c.name) => {
            let kernel = kernel_of(&c.name);
            skipped.push(format!(
                "{file}: skipping config `{}`: it expects kernel `{k}`, this machine runs `{kernel}`",
                c.name
            ));
            false
        }
        _ => true,
    });
    if s.configs.is_empty() {
        let mut errors = vec![format!(
            "{file}: nothing to run: every configuration was skipped"
        )];
        errors.extend(skipped);
        return Err(errors);
    }
    Ok((s, skipped))
}

/// `--only` names configurations the scenario has.
pub fn check_only(s: &Scenario, only: &[String]) -> Result<(), Vec<String>> {
    let names: Vec<&str> = s.configs.iter().map(|c| c.name.as_str()).collect();
    let errors: Vec<String> = only
        .iter()
        .filter(|n| !names.contains(&n.as_str()))
        .map(|n| {
            format!(
                "{}: --only {n}: no such configuration (have: {})",
                s.path.display(),
                names.join(", ")
            )
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// What a configuration's own boot asks (`cmdline`, `vm`) checked
/// against the target before anything boots: only the VM lab can boot a
/// configuration's kernel or command line; its kernels must share the
/// guests' architecture; `preempt=` needs a kernel that chooses its
/// preemption at boot (PREEMPT_DYNAMIC), where its config says. One line
/// per problem. `on_lava`: the run goes to a LAVA lab (`--lava`), whatever
/// `[target]` says.
pub fn boot_checks(s: &Scenario, on_lava: bool) -> Vec<String> {
    let file = s.path.display();
    let vm = s
        .target
        .as_ref()
        .and_then(|t| t.vm.as_ref())
        .filter(|_| !on_lava);
    let mut out = Vec::new();
    for c in s
        .configs
        .iter()
        .filter(|c| c.cmdline.is_some() || c.vm.is_some())
    {
        let key = if c.vm.is_some() { "vm" } else { "cmdline" };
        let Some(vm) = vm else {
            let place = match (&s.target, on_lava || s.lava.is_some()) {
                (_, true) => "a LAVA lab, whose job boots one kernel".to_string(),
                (Some(t), false) => {
                    format!("the board {}, which nothing here boots", t.destination)
                }
                (None, false) => "this machine".to_string(),
            };
            out.push(format!(
                "{file}: config `{}`: {key}: needs a target the run boots ([target] vm, the \
                 VM lab); this run's target is {place}",
                c.name
            ));
            continue;
        };
        let guest = c.vm_of(vm);
        if let Some(own) = c.vm.as_ref().and_then(|v| v.kernel.as_ref()) {
            match xrunbench_lab::lab::vm::image_arch(own) {
                Some(a) if a != vm.arch() => out.push(format!(
                    "{file}: config `{}`: vm.kernel: {} is an {} kernel; the run's guests are \
                     {} (configurations of one run share an architecture)",
                    c.name,
                    own.display(),
                    a.name(),
                    vm.arch().name()
                )),
                _ => {}
            }
        }
        let preempt = c
            .cmdline
            .iter()
            .flat_map(|l| l.split_whitespace())
            .find(|w| w.starts_with("preempt="));
        if let Some(word) = preempt {
            if xrunbench_lab::lab::vm::preempt_dynamic(&guest.kernel) == Some(false) {
                out.push(format!(
                    "{file}: config `{}`: cmdline: `{word}` needs a kernel built with \
                     PREEMPT_DYNAMIC; {}'s config has none (its preemption is fixed when built)",
                    c.name,
                    guest.kernel.display()
                ));
            }
        }
    }
    out
}

/// What the running kernels made of each configuration's `cmdline`
/// (`machines[i]` is configuration `i`'s, `unknown[i]` the parameters its
/// kernel passed on to user space): a parameter missing from
/// /proc/cmdline, one the kernel did not know, or a `preempt=` mode that
/// is not the one running is not applied. One line per problem.
pub fn cmdline_read_back(
    s: &Scenario,
    machines: &[xrunbench_schema::trial::MachineFingerprint],
    unknown: &[Vec<String>],
) -> Vec<String> {
    let file = s.path.display();
    let mut out = Vec::new();
    for (i, c) in s.configs.iter().enumerate() {
        let (Some(cmdline), Some(m)) = (&c.cmdline, machines.get(i)) else {
            continue;
        };
        let running: Vec<&str> = m.cmdline.split_whitespace().collect();
        for word in cmdline.split_whitespace() {
            let why = if !running.contains(&word) {
                Some(format!("/proc/cmdline is `{}`", one_line(&m.cmdline)))
            } else if unknown.get(i).is_some_and(|u| u.iter().any(|w| w == word)) {
                Some("the kernel did not take it (it passed it on to user space: a parameter it does not \
                     know, or one whose value it refused)".to_string())
            } else if let Some(mode) = word.strip_prefix("preempt=") {
                match &m.preempt {
                    Some(p) if p == mode => None,
                    Some(p) => Some(format!("the kernel runs preempt `{}`", one_line(p))),
                    None => Some("the kernel does not say its preemption mode".to_string()),
                }
            } else {
                None
            };
            if let Some(why) = why {
                out.push(format!(
                    "{file}: config `{}`: cmdline: `{word}` not applied: {why}",
                    c.name
                ));
            }
        }
    }
    out
}

/// What only the host can check: each WAV file is there and is a PCM WAV
/// (read on the host, before it is copied to a target). Returns
/// `(configuration, line)` for each problem.
pub fn host_checks(s: &Scenario) -> Vec<(String, String)> {
    let file = s.path.display();
    let mut out = Vec::new();
    for c in &s.configs {
        if let AudioSource::File(p) = &c.audio.source {
            if let Err(e) = check_regular_file(p).and_then(|()| check_wav(p)) {
                out.push((
                    c.name.clone(),
                    format!("{file}: config `{}`: audio.file: {e}", c.name),
                ));
            }
        }
    }
    out
}

/// The player and the trial read only regular files, and so do we: opening
/// a FIFO for reading waits for a writer (no signal ends that wait), and a
/// device or directory is not a recording. `stat` does not open it.
fn check_regular_file(path: &Path) -> Result<(), String> {
    let Ok(meta) = std::fs::metadata(path) else {
        // Missing or unreadable: check_wav says which.
        return Ok(());
    };
    if meta.is_file() {
        return Ok(());
    }
    let what = xrunbench_wav::read::kind_of(meta.file_type());
    Err(format!(
        "{}: not a regular file ({what}): expected a WAV file",
        path.display()
    ))
}

fn check_wav(path: &Path) -> Result<(), String> {
    if !path.exists() {
        return Err(format!("{}: no such file", path.display()));
    }
    // The player's own reader: its errors name the file and what was expected.
    xrunbench_wav::WavStream::open(path)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The target's problems as lines in the scenario's terms: the spec's
/// field becomes the scenario key a user wrote. A configuration whose WAV
/// the host already refused is not reported twice.
pub fn target_lines(s: &Scenario, report: &CheckReport, host: &[(String, String)]) -> Vec<String> {
    let file = s.path.display();
    report
        .problems
        .iter()
        .filter(|p| {
            !(p.field.as_deref() == Some("audio.file") && host.iter().any(|(c, _)| *c == p.config))
        })
        .map(|p| {
            let field = p
                .field
                .as_deref()
                .map(|f| format!("{}: ", one_line(&scenario_key(f))))
                .unwrap_or_default();
            // The target's words, escaped: a board may print anything.
            format!(
                "{file}: config `{}`: {field}{}",
                one_line(&p.config),
                one_line(&p.message)
            )
        })
        .collect()
}

/// The scenario key behind a trial spec's field.
fn scenario_key(spec_field: &str) -> String {
    match spec_field {
        "pm_qos_us" => "pm_qos_cpu_dma_latency_us".into(),
        "audio.tone" => "audio.generate".into(),
        f => match f.strip_prefix("player.") {
            Some(rest) => format!("audio.{}", rest.trim_end_matches("_us")),
            None => f.into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use xrunbench_schema::trial::MachineFingerprint;

    use crate::{parse, resolve, Scenario};

    /// A file that reads as `arch`'s kernel image (its boot header's
    /// magic), with a Debian-style config beside it saying `dynamic`.
    fn fake_kernel(dir: &Path, name: &str, arch: &str, dynamic: bool) -> PathBuf {
        let boot = dir.join(name).join("boot");
        std::fs::create_dir_all(&boot).unwrap();
        let mut image = vec![0u8; 0x400];
        match arch {
            "x86_64" => image[0x202..0x206].copy_from_slice(b"HdrS"),
            _ => image[0x38..0x3c].copy_from_slice(b"ARM\x64"),
        }
        let kernel = boot.join(format!("vmlinuz-{name}"));
        std::fs::write(&kernel, image).unwrap();
        let config = if dynamic {
            "CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n"
        } else {
            "CONFIG_PREEMPT_VOLUNTARY=y\n# CONFIG_PREEMPT_DYNAMIC is not set\n"
        };
        std::fs::write(boot.join(format!("config-{name}")), config).unwrap();
        kernel
    }

    fn scenario(dir: &Path, configs: &str, target: &str) -> Scenario {
        let path = dir.join("s.toml");
        let text = format!("name = \"s\"\n[audio]\ngenerate = {{}}\n{configs}{target}");
        resolve(&path, &parse(&path, &text).unwrap()).unwrap()
    }

    #[test]
    fn a_boot_of_its_own_needs_the_lab_a_dynamic_kernel_and_one_architecture() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fake_kernel(d, "base", "x86_64", true);
        fake_kernel(d, "fixed", "x86_64", false);
        fake_kernel(d, "arm", "aarch64", true);
        let vm = "[target]\nvm = { kernel = \"base/boot/vmlinuz-base\" }\n";
        let configs = "[[config]]\nname = \"full\"\ncmdline = \"preempt=full\"\n\
                       [[config]]\nname = \"fixed\"\ncmdline = \"preempt=full\"\n\
                       vm = { kernel = \"fixed/boot/vmlinuz-fixed\" }\n\
                       [[config]]\nname = \"arm\"\nvm = { kernel = \"arm/boot/vmlinuz-arm\" }\n";
        let lines = super::boot_checks(&scenario(d, configs, vm), false);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(
            lines[0].contains(
                "config `fixed`: cmdline: `preempt=full` needs a kernel built with PREEMPT_DYNAMIC"
            ),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].contains("config `arm`: vm.kernel: ")
                && lines[1].contains("is an aarch64 kernel; the run's guests are x86_64"),
            "{}",
            lines[1]
        );
        // On a board nothing here boots, or on this machine: refused.
        for (target, place) in [
            (
                "[target]\nssh = \"root@b\"\n",
                "the board root@b, which nothing here boots",
            ),
            ("", "this machine"),
        ] {
            let lines = super::boot_checks(
                &scenario(
                    d,
                    "[[config]]\nname = \"t\"\ncmdline = \"threadirqs\"\n",
                    target,
                ),
                false,
            );
            assert_eq!(lines.len(), 1, "{lines:#?}");
            assert!(
                lines[0].contains("config `t`: cmdline: needs a target the run boots")
                    && lines[0].ends_with(place),
                "{}",
                lines[0]
            );
        }
    }

    #[test]
    fn one_guest_per_distinct_kernel_and_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fake_kernel(d, "base", "x86_64", true);
        fake_kernel(d, "new", "x86_64", true);
        let s = scenario(
            d,
            "[[config]]\nname = \"a\"\n\
             [[config]]\nname = \"full\"\ncmdline = \"preempt=full\"\n\
             [[config]]\nname = \"full2\"\ncmdline = \" preempt=full \"\n\
             [[config]]\nname = \"new\"\nvm = { kernel = \"new/boot/vmlinuz-new\" }\n",
            "[target]\nvm = { kernel = \"base/boot/vmlinuz-base\", append = \"x=1\" }\n",
        );
        let vm = s.target.as_ref().unwrap().vm.as_ref().unwrap();
        let (guests, of) = crate::guests_of(&s, vm);
        assert_eq!(guests.len(), 3, "{guests:#?}");
        assert_eq!(guests[0], *vm);
        assert_eq!(guests[1].append, "x=1 preempt=full");
        assert!(guests[2].kernel.ends_with("vmlinuz-new"));
        let at: Vec<usize> = ["a", "full", "full2", "new"]
            .iter()
            .map(|c| of[*c])
            .collect();
        assert_eq!(at, [0, 1, 1, 2]);
    }

    #[test]
    fn a_command_line_is_one_line_of_words_the_lab_does_not_set() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        for (value, words) in [
            ("\"\"", "cmdline: empty"),
            ("\"a\\nb\"", "cmdline: \"a\\nb\" holds '\\n'"),
            (
                "\"console=tty0\"",
                "cmdline: `console=tty0`: the lab sets the console",
            ),
        ] {
            let text = format!(
                "name = \"s\"\n[audio]\ngenerate = {{}}\n[[config]]\nname = \"c\"\ncmdline = {value}\n"
            );
            let e = resolve(&path, &parse(&path, &text).unwrap()).unwrap_err();
            assert!(
                e.to_string()
                    .contains(&format!("s.toml: config `c`: {words}")),
                "{value}: {e}"
            );
        }
    }

    #[test]
    fn a_guest_names_an_image_or_a_debian_version() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fake_kernel(d, "base", "x86_64", true);
        let path = d.join("s.toml");
        for (vm, words) in [
            (
                "{ kernel = \"base/boot/vmlinuz-base\", debian = \"6.12\" }",
                "target.vm.debian: give `kernel` (an image) or `debian` (a version), not both",
            ),
            (
                "{ sound = \"dummy\" }",
                "target.vm.kernel: missing: name an image",
            ),
            (
                "{ kernel = \"base/boot/vmlinuz-base\", rt = true }",
                "target.vm.rt: goes with `debian`",
            ),
            (
                "{ debian = \"6.x\" }",
                "target.vm.debian: `6.x`: expected MAJOR.MINOR, such as 6.12",
            ),
            (
                "{ debian = \"6.12\", modules = \"m\" }",
                "target.vm.modules: Debian's kernel (`debian`) comes with its own modules",
            ),
        ] {
            let text = format!(
                "name = \"s\"\n[audio]\ngenerate = {{}}\n[[config]]\nname = \"c\"\n[target]\nvm = {vm}\n"
            );
            let e = resolve(&path, &parse(&path, &text).unwrap()).unwrap_err();
            assert!(e.to_string().contains(words), "{vm}: {e}");
        }
    }

    #[test]
    fn a_parameter_that_did_not_take_is_not_applied() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fake_kernel(d, "base", "x86_64", true);
        let s = scenario(
            d,
            "[[config]]\nname = \"lazy\"\ncmdline = \"preempt=lazy threadirqs\"\n\
             [[config]]\nname = \"odd\"\ncmdline = \"nosuch=1\"\n\
             [[config]]\nname = \"plain\"\n",
            "[target]\nvm = { kernel = \"base/boot/vmlinuz-base\" }\n",
        );
        let machine = |cmdline: &str, preempt: &str| MachineFingerprint {
            cmdline: cmdline.into(),
            preempt: Some(preempt.into()),
            ..MachineFingerprint::default()
        };
        let good = [
            machine("console=ttyS0 preempt=lazy threadirqs", "lazy"),
            machine("console=ttyS0 nosuch=1", "voluntary"),
            machine("console=ttyS0", "voluntary"),
        ];
        let none = vec![Vec::new(); 3];
        assert!(super::cmdline_read_back(&s, &good, &none).is_empty());
        // The mode did not switch; a parameter is missing; one is unknown.
        let bad = [
            machine("console=ttyS0 preempt=lazy", "voluntary"),
            machine("console=ttyS0 nosuch=1", "voluntary"),
            machine("console=ttyS0", "voluntary"),
        ];
        let unknown = vec![vec![], vec!["nosuch=1".to_string()], vec![]];
        let lines = super::cmdline_read_back(&s, &bad, &unknown);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(lines[0].ends_with(
            "config `lazy`: cmdline: `preempt=lazy` not applied: the kernel runs preempt `voluntary`"
        ));
        assert!(lines[1].ends_with(
            "config `lazy`: cmdline: `threadirqs` not applied: /proc/cmdline is `console=ttyS0 preempt=lazy`"
        ));
        assert!(lines[2].ends_with(
            "config `odd`: cmdline: `nosuch=1` not applied: the kernel did not take it (it passed it on to user space: a parameter it does not know, or one whose value it refused)"
        ));
    }

    #[test]
    fn spec_fields_map_to_scenario_keys() {
        assert_eq!(super::scenario_key("player.cpu"), "audio.cpu");
        assert_eq!(
            super::scenario_key("player.buffer_time_us"),
            "audio.buffer_time"
        );
        assert_eq!(super::scenario_key("audio.file"), "audio.file");
        assert_eq!(
            super::scenario_key("pm_qos_us"),
            "pm_qos_cpu_dma_latency_us"
        );
    }
}
