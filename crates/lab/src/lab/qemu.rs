//! A guest under QEMU: the command line for each architecture (TCG, or KVM
//! where it works), its console in a file the host watches, a user-mode
//! network that reaches nothing but one port forwarded from 127.0.0.1
//! (`restrict=on`), and the emulated sound card. A [`Guest`] is QEMU as
//! our child: killed and reaped when dropped, whatever happened.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::initramfs::{Sound, NO_SOUND, NO_SSHD};
use super::qmp::Qmp;
use crate::arch::Arch;
use crate::signals;
use xrunbench_trial::child::cpu_time;

/// How QEMU runs the guest's CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// The host's CPU through /dev/kvm.
    Kvm,
    /// QEMU's own emulation (multi-threaded): slower, and its timing
    /// follows the host's load.
    Tcg,
}

impl Accel {
    /// Its name in a scenario and in the run header.
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// Everything one boot needs.
#[derive(Debug, Clone)]
pub struct Boot {
    /// The guest's architecture.
    pub arch: Arch,
    /// The kernel image.
    pub kernel: PathBuf,
    /// The initramfs.
    pub initrd: PathBuf,
    /// More kernel command line.
    pub append: String,
    /// Virtual CPUs.
    pub cpus: u32,
    /// Memory, MiB.
    pub memory_mib: u32,
    /// The emulated sound card (HDA needs a device; dummy and aloop none).
    pub sound: Sound,
    /// KVM or TCG.
    pub accel: Accel,
    /// Whether a host port on 127.0.0.1 is forwarded to the guest's port
    /// 22 (QEMU binds one the kernel chooses: [`Guest::ssh_port`]); if
    /// not, the guest has no network.
    pub ssh: bool,
    /// Where the guest's console goes (QEMU's monitor socket beside it).
    pub console: PathBuf,
}

impl Boot {
    /// QEMU's monitor (QMP) socket: beside the console, in the guest's
    /// private directory.
    pub fn monitor(&self) -> PathBuf {
        monitor_beside(&self.console)
    }

    /// The QEMU command line.
    pub fn command(&self) -> Command {
        let (program, machine, console, nic): (&str, &[&str], &str, &str) = match self.arch {
            Arch::X86_64 => ("qemu-system-x86_64", &[], "ttyS0", "e1000"),
            Arch::Aarch64 => (
                "qemu-system-aarch64",
                &["-M", "virt"],
                "ttyAMA0",
                "virtio-net-pci",
            ),
            // highmem=off: Debian's armmp kernel has no LPAE, so it
            // cannot reach PCI windows above 4 GiB, where QEMU puts them
            // for a CPU that has LPAE (the Cortex-A15); the NIC's BARs
            // then go unassigned and the guest has no network.
            Arch::Armv7 => (
                "qemu-system-arm",
                &["-M", "virt,highmem=off"],
                "ttyAMA0",
                "virtio-net-pci",
            ),
        };
        let mut c = Command::new(program);
        c.args(machine);
        match (self.accel, self.arch) {
            (Accel::Kvm, _) => c.args(["-accel", "kvm", "-cpu", "host"]),
            (Accel::Tcg, Arch::X86_64) => c.args(["-accel", "tcg,thread=multi", "-cpu", "max"]),
            (Accel::Tcg, Arch::Aarch64) => {
                c.args(["-accel", "tcg,thread=multi", "-cpu", "cortex-a57"])
            }
            (Accel::Tcg, Arch::Armv7) => {
                c.args(["-accel", "tcg,thread=multi", "-cpu", "cortex-a15"])
            }
        };
        c.arg("-smp").arg(self.cpus.to_string());
        c.arg("-m").arg(self.memory_mib.to_string());
        c.arg("-kernel").arg(&self.kernel);
        c.arg("-initrd").arg(&self.initrd);
        // noirqdebug: PREEMPT_RT kernels otherwise disable a serial port's
        // IRQ as "nobody cared" and hang on it. no_timer_check: x86's
        // boot-time check that the IO-APIC timer ticks counts ticks over a
        // busy-wait; an emulated CPU the host starves sees too few and the
        // kernel panics ("IO-APIC + timer doesn't work!", seen beside 60
        // busy loops) — virtual machines skip it, as virtme-ng's do.
        let timer_check = match self.arch {
            Arch::X86_64 => " no_timer_check",
            Arch::Aarch64 | Arch::Armv7 => "",
        };
        // tsc=unstable: x86 patches a live static key with an int3 while
        // other CPUs run the code, and QEMU's multi-threaded TCG loses
        // that race now and then: 1 of 25 boots of Debian's 6.12 beside
        // busy loops died at 2.2 s, "Oops: int3" in sched_clock_cpu,
        // right as the kernel marks sched_clock stable (the flip of
        // `__sched_clock_stable`). With the TSC unstable from the start
        // the key never flips; the clocksource is the HPET.
        let tsc = match (self.accel, self.arch) {
            (Accel::Tcg, Arch::X86_64) => " tsc=unstable",
            _ => "",
        };
        c.arg("-append").arg(format!(
            "console={console} quiet loglevel=3 noirqdebug{timer_check}{tsc} panic=-1 {}",
            self.append
        ));
        c.args(["-display", "none", "-no-reboot", "-monitor", "none"]);
        c.arg("-qmp").arg(format!(
            "unix:{},server=on,wait=off",
            self.monitor().display()
        ));
        c.arg("-serial")
            .arg(format!("file:{}", self.console.display()));
        if self.ssh {
            // Only the forwarded port: the guest reaches no network at all.
            // Port 0: QEMU binds a port the kernel chooses, so that no
            // other guest (or program) can take it between choice and bind.
            c.arg("-nic").arg(format!(
                "user,model={nic},restrict=on,hostfwd=tcp:127.0.0.1:0-:22"
            ));
        } else {
            c.args(["-nic", "none"]);
        }
        if self.sound == Sound::Hda {
            c.args([
                "-audiodev",
                "none,id=snd0",
                "-device",
                "intel-hda",
                "-device",
                "hda-output,audiodev=snd0",
            ]);
        }
        c
    }
}

/// The modules of the network card [`Boot::command`] gives a guest of
/// `arch` (none needed where the kernel has them built in).
pub fn nic_modules(arch: Arch) -> &'static [&'static str] {
    match arch {
        Arch::X86_64 => &["e1000"],
        Arch::Aarch64 | Arch::Armv7 => &["virtio-pci", "virtio-net"],
    }
}

/// The nice value QEMU runs at where we may set it (root), both as a
/// process and as its own scheduling group (QEMU starts a session of its
/// own, so the kernel's autogroup puts it in a group of its own, and the
/// group's nice is set from `/proc/self/autogroup`). The emulated board
/// then takes the host's CPUs ahead of the host's other work, as a real
/// board is not slowed by its host's. Beside 60 busy loops at nice 0 in
/// our own session, QEMU had 2 % of a CPU at nice 0 (an 8 s trial with its
/// load took some 12 min), 50–60 % at nice -20 in the loops' group (the
/// base kernel's longest gaps went from 128–214 ms to 398–2294 ms, as long
/// as a regression's), and each of two CPU-bound threads in a group of
/// their own at -20 had over 80 % of a CPU. Where the kernel has no
/// autogroup only the process's nice applies.
pub const LAB_NICE: i32 = -20;

/// [`LAB_NICE`] as written to `/proc/self/autogroup` (between fork and exec
/// nothing may be formatted).
const LAB_NICE_TEXT: &[u8] = b"-20";

/// The nice of process `pid`'s scheduling group (autogroup), if the kernel
/// has one for it.
fn autogroup_nice(pid: u32) -> Option<i32> {
    let line = fs::read_to_string(format!("/proc/{pid}/autogroup")).ok()?;
    line.split_whitespace().last()?.parse().ok()
}

/// A running guest: QEMU, our child, killed and reaped when dropped.
pub struct Guest {
    child: Child,
    /// QEMU's nice value ([`LAB_NICE`] where we may set it).
    nice: i32,
    /// The nice of QEMU's own scheduling group, where the kernel has
    /// autogroup ([`LAB_NICE`] where we may set it).
    group_nice: Option<i32>,
    accel: Accel,
    console: PathBuf,
    /// The host port QEMU forwards to the guest's sshd.
    ssh_port: Option<u16>,
    /// Seconds from QEMU's start to the guest's ready line.
    pub ready_after: f64,
}

/// How a boot ended, when it did not reach the ready line.
#[derive(Debug)]
pub enum BootError {
    /// QEMU itself refused (its message).
    Qemu(String),
    /// The guest ran, but never said it was ready within the limit.
    Timeout(String),
    /// The guest said why it is not ready (no sound card, a panic).
    Guest(String),
    /// We were asked to stop.
    Interrupted(i32),
}

impl std::fmt::Display for BootError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BootError::Qemu(m) | BootError::Timeout(m) | BootError::Guest(m) => f.write_str(m),
            BootError::Interrupted(s) => write!(f, "stopped by signal {s} while the guest booted"),
        }
    }
}

impl std::error::Error for BootError {}

/// Makes `cmd` start in a session of its own (so also a process group of
/// its own: a terminal's Ctrl-C is ours to handle), and, where we may,
/// ahead of the host's other work: [`LAB_NICE`] for the process and for its
/// scheduling group (autogroup), which without the session it would share
/// with whatever else our session runs.
fn ahead_of_the_host(cmd: &mut Command) {
    // SAFETY: setsid, setpriority, open, write and close are plain system
    // calls on static data: async-signal-safe, so safe between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Both refused without CAP_SYS_NICE: QEMU then keeps our own.
            let _ = libc::setpriority(libc::PRIO_PROCESS, 0, LAB_NICE);
            let group = libc::open(c"/proc/self/autogroup".as_ptr(), libc::O_WRONLY);
            if group >= 0 {
                let _ = libc::write(group, LAB_NICE_TEXT.as_ptr().cast(), LAB_NICE_TEXT.len());
                libc::close(group);
            }
            Ok(())
        });
    }
}

/// Starts QEMU for `boot` and waits until the guest is ready (its console
/// has a line holding `ready`: [`super::initramfs::READY`], or a board
/// farm's console line), QEMU exits, the guest reports a failure, `limit`
/// passes or we are asked to stop; on any failure QEMU is gone when this
/// returns.
pub fn start(boot: &Boot, ready: &str, limit: Duration) -> Result<Guest, BootError> {
    let _ = fs::remove_file(&boot.console);
    let stderr = boot.console.with_extension("qemu.log");
    let err_file = fs::File::create(&stderr).map_err(|e| BootError::Qemu(e.to_string()))?;
    let started = Instant::now();
    let mut cmd = boot.command();
    ahead_of_the_host(&mut cmd);
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err_file)
        .spawn()
        .map_err(|e| {
            BootError::Qemu(format!(
                "cannot start {:?} (package qemu-system-x86 / qemu-system-arm): {e}",
                boot.command().get_program()
            ))
        })?;
    // SAFETY: getpriority has no preconditions; errno is not needed (a
    // vanished child reads as -1, and its status says why).
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, child.id() as libc::id_t) };
    let group_nice = autogroup_nice(child.id());
    let mut guest = Guest {
        child,
        nice,
        group_nice,
        accel: boot.accel,
        console: boot.console.clone(),
        ssh_port: None,
        ready_after: 0.0,
    };
    if boot.ssh {
        guest.ssh_port = Some(forwarded_ssh_port(boot, &mut guest.child, &stderr)?);
    }
    loop {
        let console = fs::read_to_string(&boot.console).unwrap_or_default();
        if let Some(why) = guest_failure(&console, boot) {
            return Err(BootError::Guest(why));
        }
        if console.lines().any(|l| l.contains(ready)) {
            guest.ready_after = started.elapsed().as_secs_f64();
            return Ok(guest);
        }
        if let Ok(Some(status)) = guest.child.try_wait() {
            return Err(BootError::Qemu(format!(
                "QEMU ended ({status}) before the guest was ready: {}",
                last_line(&stderr)
            )));
        }
        if let Some(sig) = signals::stop_requested() {
            return Err(BootError::Interrupted(sig));
        }
        if let Some(spent) = over_limit(boot.accel, limit, started, guest.child.id()) {
            return Err(BootError::Timeout(format!(
                "the guest did not reach its init within {} s of {} ({}): is {} a kernel \
                 for {}?",
                limit.as_secs(),
                spent,
                boot.accel.name(),
                boot.kernel.display(),
                boot.arch.name()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Why the guest of `boot` will not be ready, when its console says so:
/// no sound card, an sshd that did not start, a kernel panic.
fn guest_failure(console: &str, boot: &Boot) -> Option<String> {
    if let Some(line) = console.lines().find(|l| l.contains(NO_SOUND)) {
        return Some(format!(
            "the kernel {} has no {} sound card: {}",
            boot.kernel.display(),
            boot.sound.name(),
            line.trim()
        ));
    }
    if let Some(line) = console.lines().find(|l| l.contains(NO_SSHD)) {
        return Some(format!(
            "the guest's sshd did not start: {}; the console's last lines: {}",
            xrunbench_schema::doc::one_line(line.trim()),
            console_tail(console, 6)
        ));
    }
    panic_of(console).map(|why| format!("the guest's kernel panicked: {why}"))
}

/// QEMU's monitor (QMP) socket of a guest whose console is `console`.
fn monitor_beside(console: &Path) -> PathBuf {
    console.with_extension("qmp")
}

/// The panic in a guest's console, with what says where it happened: the
/// oops' first line (`BUG:`, `general protection fault`, …) and its `RIP:`
/// or `pc :` line, which the panic line alone ("Fatal exception in
/// interrupt") does not say; `None` without a panic.
fn panic_of(console: &str) -> Option<String> {
    const OOPS: [&str; 6] = [
        "BUG:",
        "Oops",
        "general protection fault",
        "kernel BUG at",
        "Unable to handle kernel",
        "divide error",
    ];
    let lines: Vec<&str> = console.lines().collect();
    let at = lines.iter().position(|l| l.contains("Kernel panic"))?;
    let before = &lines[..at];
    let oops = before.iter().find(|l| OOPS.iter().any(|o| l.contains(o)));
    let place = before
        .iter()
        .find(|l| l.contains("RIP:") || l.contains(" pc : "));
    let parts: Vec<String> = [Some(&lines[at]), oops, place]
        .into_iter()
        .flatten()
        .map(|l| xrunbench_schema::doc::one_line(l.trim()))
        .collect();
    Some(parts.join("; "))
}

/// The last `n` lines of a console, on one line.
pub fn console_tail(console: &str, n: usize) -> String {
    let lines: Vec<&str> = console
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let from = lines.len().saturating_sub(n);
    xrunbench_schema::doc::one_line(&lines[from..].join(" / "))
}

/// The host port QEMU bound for the guest's sshd, asked of its monitor.
/// A QEMU that refuses to boot (not a kernel) may accept the monitor's
/// connection and end under it: a monitor that fails is then reported as
/// QEMU's own ending, with its message.
fn forwarded_ssh_port(boot: &Boot, child: &mut Child, stderr: &Path) -> Result<u16, BootError> {
    let ended = |child: &mut Child| -> Option<String> {
        match child.try_wait() {
            Ok(Some(status)) => Some(format!(
                "QEMU ended ({status}) before the guest was ready: {}",
                last_line(stderr)
            )),
            _ => None,
        }
    };
    let asked = Qmp::connect(&boot.monitor(), || {
        if let Some(sig) = signals::stop_requested() {
            return Some(format!("stopped by signal {sig}"));
        }
        ended(child)
    })
    .and_then(|mut monitor| monitor.forwarded_port(22));
    asked.map_err(|e| {
        if let Some(sig) = signals::stop_requested() {
            return BootError::Interrupted(sig);
        }
        // Its monitor closed under us: QEMU is likely ending. Its status
        // says why, once it has ended (bounded: a QEMU that keeps running
        // is killed by the caller).
        let deadline = Instant::now() + MONITOR_GRACE;
        loop {
            if let Some(why) = ended(child) {
                return BootError::Qemu(why);
            }
            if Instant::now() >= deadline {
                return BootError::Qemu(format!("{e:#}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

/// How long a QEMU whose monitor failed is given to end by itself.
const MONITOR_GRACE: Duration = Duration::from_secs(10);

/// The last line of QEMU's stderr, escaped.
fn last_line(stderr: &Path) -> String {
    let text = fs::read_to_string(stderr).unwrap_or_default();
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    xrunbench_schema::doc::one_line(last.trim())
}

/// How many times `limit` of wall-clock time an emulated guest may take
/// when its CPU time has not reached `limit`: a bound for a guest that
/// idles instead of booting.
pub const TCG_WALL_FACTOR: u32 = 10;

/// Whether a boot started at `started` is past `limit`, and of what: for
/// TCG the limit is on QEMU's own CPU time — an emulated CPU boots as fast
/// as the host lets it run, so on a host busy with other work the wall
/// clock says nothing about the guest (232 s to ready beside 60 busy
/// loops, where a quiet host takes 7) — for KVM, the wall clock.
fn over_limit(accel: Accel, limit: Duration, started: Instant, pid: u32) -> Option<&'static str> {
    let cpu = (accel == Accel::Tcg).then_some((pid, Duration::ZERO, 1));
    past_limit(limit, started, cpu, Instant::now())
}

/// The one rule for every time limit on a guest (its boot, a trial in it):
/// whether `limit` has passed at `now`, and on which clock. With `cpu`
/// (QEMU's pid, its CPU time at `started`, and the number of emulated CPUs
/// it is shared among) the limit is on the CPU time QEMU has used since,
/// per emulated CPU — a guest of two busy CPUs takes two seconds of QEMU's
/// time a second, and is not twice as late for it — with
/// [`TCG_WALL_FACTOR`] × `limit` of wall-clock time as a backstop (also
/// what ends it once QEMU's CPU time cannot be read); without, on the wall
/// clock.
pub fn past_limit(
    limit: Duration,
    started: Instant,
    cpu: Option<(u32, Duration, u32)>,
    now: Instant,
) -> Option<&'static str> {
    let wall = now.saturating_duration_since(started);
    let Some((pid, at_start, cpus)) = cpu else {
        return (wall >= limit).then_some("wall-clock time");
    };
    let per_cpu = |used: Duration| used.saturating_sub(at_start) / cpus.max(1);
    if cpu_time(pid).is_some_and(|used| per_cpu(used) >= limit) {
        Some("QEMU's CPU time")
    } else if wall >= limit * TCG_WALL_FACTOR {
        Some("wall-clock time (ten times the limit)")
    } else {
        None
    }
}

impl Guest {
    /// How QEMU is placed among the host's work, for the run header:
    /// "nice -20, own group at nice -20".
    pub fn priority(&self) -> String {
        match self.group_nice {
            Some(g) => format!("nice {}, own group at nice {g}", self.nice),
            None => format!("nice {}", self.nice),
        }
    }

    /// QEMU's pid when the guest's progress is timed on QEMU's CPU time
    /// (under TCG the guest runs only as fast as the host lets QEMU run);
    /// `None` under KVM, whose guest the wall clock times.
    pub fn emulated_pid(&self) -> Option<u32> {
        (self.accel == Accel::Tcg).then(|| self.child.id())
    }

    /// QEMU's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The host port (on 127.0.0.1) forwarded to the guest's sshd, when
    /// it was booted with one.
    pub fn ssh_port(&self) -> Option<u16> {
        self.ssh_port
    }

    /// Stops the guest's CPUs (QMP `stop`): QEMU takes no CPU and the
    /// guest's clocks stand still until [`Guest::thaw`] — how a run keeps
    /// several guests booted and measures one at a time.
    pub fn freeze(&mut self) -> Result<()> {
        self.command("stop")
    }

    /// Runs the guest's CPUs again (QMP `cont`).
    pub fn thaw(&mut self) -> Result<()> {
        self.command("cont")
    }

    /// Whether the guest's CPUs run (QMP `query-status`).
    pub fn running(&mut self) -> Result<bool> {
        let status = self
            .connect()?
            .execute("query-status", serde_json::json!({}))?;
        Ok(status["running"].as_bool().unwrap_or(false))
    }

    fn command(&mut self, name: &str) -> Result<()> {
        self.connect()?.execute(name, serde_json::json!({}))?;
        Ok(())
    }

    /// The last `n` lines of its console, on one line.
    pub fn console_tail(&self, n: usize) -> String {
        console_tail(&fs::read_to_string(&self.console).unwrap_or_default(), n)
    }

    /// A connection to QEMU's monitor (it serves one at a time).
    fn connect(&mut self) -> Result<Qmp> {
        let child = &mut self.child;
        Qmp::connect(&monitor_beside(&self.console), || {
            matches!(child.try_wait(), Ok(Some(_))).then(|| "QEMU has ended".to_string())
        })
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether /dev/kvm can be opened for reading and writing (it may still
/// not run a guest: see [`super::vm::kvm_works`]).
pub fn kvm_opens() -> bool {
    fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_names_its_oops_and_where() {
        let console = "[    2.1] ok\n\
            [    2.7] BUG: kernel NULL pointer dereference, address: 0000000000000008\n\
            [    2.7] #PF: supervisor read access in kernel mode\n\
            [    2.7] RIP: 0010:hrtimer_interrupt+0x1c/0x220\n\
            [    2.7] Kernel panic - not syncing: Fatal exception in interrupt\n";
        assert_eq!(
            panic_of(console).unwrap(),
            "[    2.7] Kernel panic - not syncing: Fatal exception in interrupt; [    2.7] BUG: \
             kernel NULL pointer dereference, address: 0000000000000008; [    2.7] RIP: \
             0010:hrtimer_interrupt+0x1c/0x220"
        );
        assert_eq!(panic_of("[ 1.0] all well\n"), None);
        assert_eq!(
            panic_of("Kernel panic - not syncing: VFS: Unable to mount root fs\n").unwrap(),
            "Kernel panic - not syncing: VFS: Unable to mount root fs"
        );
    }

    fn kernel_line(arch: Arch) -> String {
        let boot = Boot {
            arch,
            kernel: "bzImage".into(),
            initrd: "initramfs.cpio".into(),
            append: "xrb=1".into(),
            cpus: 2,
            memory_mib: 1024,
            sound: Sound::Dummy,
            accel: Accel::Tcg,
            ssh: true,
            console: "console.log".into(),
        };
        let cmd = boot.command();
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let at = args.iter().position(|a| a == "-append").unwrap();
        args[at + 1].clone()
    }

    #[test]
    fn an_emulated_boot_is_timed_by_qemu_s_cpu_time_not_the_wall_clock() {
        // This process has spent far less CPU than an hour, and the boot
        // began now: not over.
        let me = std::process::id();
        let now = Instant::now();
        assert!(cpu_time(me).is_some());
        assert_eq!(
            over_limit(Accel::Tcg, Duration::from_secs(3600), now, me),
            None
        );
        // A limit of zero CPU time is past at once.
        assert_eq!(
            over_limit(Accel::Tcg, Duration::ZERO, now, me),
            Some("QEMU's CPU time")
        );
        // No such process: only the wall-clock backstop (ten times).
        let long_ago = now - Duration::from_secs(11);
        assert_eq!(
            over_limit(Accel::Tcg, Duration::from_secs(1), long_ago, u32::MAX),
            Some("wall-clock time (ten times the limit)")
        );
        assert_eq!(
            over_limit(Accel::Tcg, Duration::from_secs(2), long_ago, u32::MAX),
            None
        );
        // KVM: the wall clock.
        assert_eq!(
            over_limit(Accel::Kvm, Duration::from_secs(1), long_ago, me),
            Some("wall-clock time")
        );
    }

    #[test]
    fn qemu_starts_in_a_session_and_scheduling_group_of_its_own() {
        assert_eq!(LAB_NICE_TEXT, LAB_NICE.to_string().as_bytes());
        // This test binary listing its tests: what it does is beside the
        // point. spawn returns once pre_exec has run; until the child is
        // reaped, its session, group and autogroup can be read, running or
        // not (and no program is started by name).
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.arg("--list").stdout(Stdio::null());
        ahead_of_the_host(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let pid = child.id();
        // SAFETY: getsid, getpgid and geteuid have no preconditions.
        let (sid, pgid, root) = unsafe {
            (
                libc::getsid(pid as libc::pid_t),
                libc::getpgid(pid as libc::pid_t),
                libc::geteuid() == 0,
            )
        };
        let group = autogroup_nice(pid);
        let mine = autogroup_nice(std::process::id());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!((sid, pgid), (pid as i32, pid as i32));
        // Where we may (root) and the kernel has autogroup: its group is
        // at LAB_NICE; elsewhere it is where the kernel put it.
        if root && mine.is_some() {
            assert_eq!(group, Some(LAB_NICE));
        }
    }

    /// Whether qemu-system-x86_64 runs here.
    fn qemu_here() -> bool {
        Command::new("qemu-system-x86_64")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// A small x86_64 boot with its ssh forward, its files in `dir` (`i`
    /// tells several apart).
    fn small_boot(dir: &Path, i: usize) -> Boot {
        Boot {
            arch: Arch::X86_64,
            kernel: "bzImage".into(),
            initrd: "initramfs.cpio".into(),
            append: String::new(),
            cpus: 1,
            memory_mib: 64,
            sound: Sound::Dummy,
            accel: Accel::Tcg,
            ssh: true,
            console: dir.join(format!("console-{i}.log")),
        }
    }

    /// QEMU with `boot`'s network and monitor only, its CPUs never started
    /// (`-S`): what binds the forward, without a kernel to boot.
    fn network_only(boot: &Boot) -> Command {
        let full = boot.command();
        let args: Vec<_> = full.get_args().collect();
        let value_of = |flag: &str| {
            let at = args.iter().position(|a| *a == flag).unwrap();
            args[at + 1].to_owned()
        };
        let mut c = Command::new(full.get_program());
        c.args(["-S", "-nodefaults", "-display", "none", "-monitor", "none"])
            .arg("-nic")
            .arg(value_of("-nic"))
            .arg("-qmp")
            .arg(value_of("-qmp"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    #[test]
    fn guests_started_at_once_never_share_a_forwarded_port() {
        xrunbench_test_support::skip_unless!(
            qemu_here(),
            "needs qemu-system-x86_64 (package qemu-system-x86)"
        );
        let dir = tempfile::tempdir().unwrap();
        let boots: Vec<Boot> = (0..4).map(|i| small_boot(dir.path(), i)).collect();
        let line: Vec<String> = boots[0]
            .command()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            line.iter()
                .any(|a| a.ends_with(",restrict=on,hostfwd=tcp:127.0.0.1:0-:22")),
            "{line:?}"
        );
        // All four spawned before any is asked: each binds while the others
        // bind, and each port is the one its own QEMU holds.
        let mut children: Vec<Child> = boots
            .iter()
            .map(|b| network_only(b).spawn().unwrap())
            .collect();
        let asked: Vec<Result<u16, String>> = boots
            .iter()
            .zip(children.iter_mut())
            .map(|(b, c)| {
                forwarded_ssh_port(b, c, &dir.path().join("none")).map_err(|e| e.to_string())
            })
            .collect();
        let reachable: Vec<bool> = asked
            .iter()
            .map(|p| {
                p.as_ref()
                    .is_ok_and(|p| std::net::TcpStream::connect(("127.0.0.1", *p)).is_ok())
            })
            .collect();
        for c in &mut children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let ports: Vec<u16> = asked.into_iter().map(Result::unwrap).collect();
        let mut distinct = ports.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        assert!(reachable.iter().all(|r| *r), "{ports:?} {reachable:?}");
    }

    #[test]
    fn an_sshd_that_did_not_start_fails_the_boot_with_the_console_s_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let boot = small_boot(dir.path(), 0);
        let console = format!(
            "[    1.2] virtio_net virtio0 enp0s1: renamed\n\
             /usr/sbin/sshd: error while loading shared libraries: libcrypt.so.1\n\
             {NO_SSHD} (exit 127): \n"
        );
        let why = guest_failure(&console, &boot).unwrap();
        assert!(
            why.starts_with(
                "the guest's sshd did not start: xrunbench-lab: sshd did not start (exit 127)"
            ) && why.contains("error while loading shared libraries: libcrypt.so.1")
                && !why.contains('\n'),
            "{why}"
        );
        assert_eq!(guest_failure("[    1.2] booting\n", &boot), None);
    }

    #[test]
    fn a_qemu_that_ends_under_its_monitor_is_reported_by_its_own_message() {
        // Not a kernel: QEMU 7.2 opened its monitor, took our connection,
        // then ended with its message ("Connection reset by peer" was all
        // we said). Here a stand-in: a monitor that hangs up, and a child
        // that ends with status 1 only after that.
        let dir = tempfile::tempdir().unwrap();
        let boot = small_boot(dir.path(), 0);
        let listener = std::os::unix::net::UnixListener::bind(boot.monitor()).unwrap();
        let stderr = dir.path().join("qemu.log");
        fs::write(&stderr, "qemu: linux kernel too old to load a ram disk\n").unwrap();
        let mut child = Command::new("sh")
            .args(["-c", "read x; exit 1"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let monitor = std::thread::spawn(move || {
            let (hung_up, _) = listener.accept().unwrap();
            drop(hung_up);
            drop(stdin);
        });
        let e = forwarded_ssh_port(&boot, &mut child, &stderr).unwrap_err();
        monitor.join().unwrap();
        let _ = child.wait();
        assert_eq!(
            e.to_string(),
            "QEMU ended (exit status: 1) before the guest was ready: qemu: linux kernel too old \
             to load a ram disk"
        );
    }

    #[test]
    fn a_frozen_guest_stands_still_until_thawed() {
        xrunbench_test_support::skip_unless!(
            qemu_here(),
            "needs qemu-system-x86_64 (package qemu-system-x86)"
        );
        let dir = tempfile::tempdir().unwrap();
        let boot = small_boot(dir.path(), 0);
        let mut guest = Guest {
            child: network_only(&boot).spawn().unwrap(),
            nice: 0,
            group_nice: None,
            accel: Accel::Tcg,
            console: boot.console.clone(),
            ssh_port: None,
            ready_after: 0.0,
        };
        // `-S`: QEMU starts with its CPUs stopped.
        assert!(!guest.running().unwrap());
        guest.thaw().unwrap();
        assert!(guest.running().unwrap());
        guest.freeze().unwrap();
        assert!(!guest.running().unwrap());
        guest.thaw().unwrap();
        assert!(guest.running().unwrap());
        // Dropped: killed and reaped; a monitor of a QEMU that has ended
        // says so instead of waiting.
        let pid = guest.child.id();
        let _ = guest.child.kill();
        let _ = guest.child.wait();
        let e = guest.freeze().unwrap_err().to_string();
        assert!(e.contains("QEMU has ended"), "{e}");
        assert!(cpu_time(pid).is_none());
    }

    #[test]
    fn an_x86_guest_skips_the_timer_check_a_starved_cpu_fails() {
        let x86 = kernel_line(Arch::X86_64);
        assert!(x86.contains(" no_timer_check "), "{x86}");
        assert!(x86.ends_with(" xrb=1"), "{x86}");
        // An x86 parameter only: on ARM it would reach /init as an argument.
        let arm = kernel_line(Arch::Aarch64);
        assert!(!arm.contains("no_timer_check"), "{arm}");
    }
}
