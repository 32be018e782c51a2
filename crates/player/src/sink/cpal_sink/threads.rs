//! The host's own threads: those the callback waits for get its
//! scheduling, and calls into the host run at its priority.

use xrunbench_schema::Priority;

use super::CpalOptions;
use crate::system;

/// Gives the threads the host started while opening the stream, where it
/// left them at SCHED_OTHER, the callback's `--priority` and `--cpu`;
/// returns a note saying so, or `None` when there is nothing to do.
///
/// The callback's thread waits for them, and a real-time thread must not
/// wait for one it can preempt (traced under load, `xrun-hackbench -g 4`
/// beside): cpal's PulseAudio host polls the latency from a thread of its
/// own that hands each request to the callback's thread through a std mpsc
/// channel; preempted halfway by that thread on their shared CPU, it left
/// the callback's thread spinning in `sched_yield` for up to 144 ms while
/// the server ran dry. cpal's PipeWire host is woken through libpipewire's
/// data-loop thread, which waited up to 38 ms for a CPU. Threads the host
/// made real-time itself (libjack's) keep their own priority; the callback
/// still applies its own to the thread it runs on
/// (`callback::Feeder::apply_sched`).
pub fn share_callback_scheduling(before: &[libc::pid_t], opts: &CpalOptions) -> Option<String> {
    if opts.priority.is_none() && opts.cpus.is_none() {
        return None;
    }
    let set = opts.cpus.as_ref().map(system::cpu_set);
    let mut moved = Vec::new();
    let mut failed = Vec::new();
    for tid in system::thread_ids() {
        // Gone already (cpal's stream-building thread), or real-time by
        // the host's own choice.
        if before.contains(&tid) || system::is_real_time(tid) != Some(false) {
            continue;
        }
        let mut errno = opts
            .priority
            .map_or(0, |p| system::set_thread_priority_raw(tid, p));
        if errno == 0 {
            errno = set.map_or(0, |s| system::set_thread_affinity_raw(tid, &s));
        }
        match errno {
            0 => moved.push(tid.to_string()),
            libc::ESRCH => {}
            e => failed.push(format!("{tid}: {}", std::io::Error::from_raw_os_error(e))),
        }
    }
    let what = [
        opts.priority.map(|p| p.to_string()),
        opts.cpus.as_ref().map(|c| format!("CPU {c}")),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(" on ");
    match (moved.is_empty(), failed.is_empty()) {
        (true, true) => None,
        (_, true) => Some(format!(
            "the host's own threads {} run at {what} like the callback, which waits for them",
            moved.join(", ")
        )),
        _ => Some(format!(
            "the host's own threads could not all get {what} (the callback waits for them): {}",
            failed.join("; ")
        )),
    }
}

/// Runs `f`, a call into the host (play, pause, dropping the stream),
/// with the calling thread at the callback's real-time `priority`, then
/// puts its own back. Such a call can hand a message to the host's
/// threads through a queue they spin-wait on (cpal's PulseAudio host:
/// a std mpsc channel, whose receiver spins and yields while a slot is
/// being written); preempted halfway by them on their CPU, a writer one
/// step below would wait behind the spinning thread forever.
pub fn at_callback_priority<T>(priority: Option<Priority>, f: impl FnOnce() -> T) -> T {
    let Some(p @ (Priority::Fifo(_) | Priority::Rr(_))) = priority else {
        return f();
    };
    let saved = system::current_scheduling();
    system::set_priority_raw(p);
    let result = f();
    if let Some(saved) = saved {
        system::restore_scheduling(&saved);
    }
    result
}
