//! SIGINT and SIGTERM end a run cleanly: the handler only records the
//! signal; the runner closes the running trial's stdin (the trial then
//! stops, restores its knobs and still sends its record), keeps the
//! finished trials and exits 130.

use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};

static STOP: AtomicUsize = AtomicUsize::new(0);

/// Installs the handlers (idempotent enough: a second call adds a second
/// handler setting the same flag).
pub fn install() -> Result<()> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_usize(sig, &STOP, sig as usize)
            .context("installing signal handlers")?;
    }
    Ok(())
}

/// The signal that asked us to stop, if any.
pub fn stop_requested() -> Option<i32> {
    match STOP.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s as i32),
    }
}
