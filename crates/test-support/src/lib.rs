//! Fixtures shared by xrunbench's test suites: one home for what every
//! suite needs (is this root, how a test that cannot run says so), so that
//! no suite grows its own copy.
//!
//! It also starts the services the suites play against: user-space sound
//! servers that give a real, clocked ALSA PCM on a machine without a sound
//! card ([`servers`]) and a private sshd on 127.0.0.1 that plays a board
//! ([`testboard`]); `cargo xtask bench` starts the same servers.
//!
//! A dev-dependency of every crate but `xtask` (automation, which runs the
//! servers for its benchmarks): nothing in it ships in a product binary.

pub mod boards;
pub mod disk;
pub mod hostile;
pub mod knobs;
pub mod lava_lab;
pub mod player;
mod procfs;
pub mod procs;
pub mod scenarios;
pub mod servers;
pub mod skip;
pub mod testboard;

pub use disk::SmallDisk;

use std::sync::{Mutex, MutexGuard};

/// Tests that change real knobs take this, so one test's "value found"
/// is never another's "value applied" (test binaries run one at a time;
/// this orders the tests of one binary).
pub fn knob_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}
pub use skip::{is_root, skipped};

/// Waits up to `secs` seconds for `cond`, asking every 20 ms; whether it
/// became true. Tests wait for a state, never for a time that assumes how
/// fast the machine is.
pub fn wait_for(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    cond()
}

/// The path of the test function this macro is expanded in
/// (`crate::module::test_name`), for messages that name the test.
#[macro_export]
macro_rules! test_name {
    () => {{
        fn here() {}
        let name = ::std::any::type_name_of_val(&here);
        name.strip_suffix("::here").unwrap_or(name)
    }};
}

/// Ends the calling test, visibly, unless `$cond` holds: a line on stderr
/// names the test and the reason (`$reason` is a `format!` string), the
/// skip is logged for `cargo xtask test`'s summary, and where no test may
/// skip (CI, or root under `cargo xtask test`) the test fails instead.
///
/// ```
/// use xrunbench_test_support::{is_root, skip_unless};
///
/// fn mounts_a_tmpfs() {
///     skip_unless!(is_root(), "mounting a tmpfs needs root");
///     // … the test proper …
/// }
/// ```
#[macro_export]
macro_rules! skip_unless {
    ($cond:expr, $($reason:tt)+) => {
        if !$cond {
            $crate::skipped($crate::test_name!(), &::std::format!($($reason)+));
            return;
        }
    };
}

/// Ends the calling test, visibly, when `$why` (an `Option<String>`: the
/// reason the machine cannot run it) is `Some`; as [`skip_unless!`].
#[macro_export]
macro_rules! skip_if_cannot {
    ($why:expr) => {
        if let Some(why) = $why {
            $crate::skipped($crate::test_name!(), &why);
            return;
        }
    };
}

/// [`skip_unless!`] for the most common reason: the test needs root.
#[macro_export]
macro_rules! skip_unless_root {
    () => {
        $crate::skip_unless!(
            $crate::is_root(),
            "needs root (run the suite as root: cargo xtask test)"
        )
    };
}
