//! The `virtual` sink: a simulated PCM clocked by CLOCK_MONOTONIC.
//!
//! Its read pointer advances at exactly the sample rate from the moment the
//! stream starts, with ALSA's semantics: the stream starts when the queue
//! reaches the start threshold, wake-ups come at period boundaries, and it
//! stops in the XRUN state, stamped with the exact moment the queue ran dry,
//! when the free space reaches the stop threshold. There is no driver
//! underneath: it measures whether the *player process* keeps up in real
//! time, and it says so (`backend: "virtual"`). Because its clock is exact
//! it is the basis of the exact-timing tests.

use xrunbench_schema::player::ClockSource;
use xrunbench_schema::Backend;

use super::{BufferRequest, Setup, Sink, SinkError, StreamFormat, XrunStamp};
use crate::clock::{self, frames_to_ns, MonoNs};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Prepared,
    Running,
    Xrun,
    Stopped,
}

/// A simulated PCM.
#[derive(Debug)]
pub struct VirtualPcm {
    setup: Setup,
    frame_bytes: usize,
    state: State,
    /// Start moment while running; the dry moment once in XRUN.
    trigger: MonoNs,
    /// Frames written since the last prepare.
    appl: u64,
    /// The "DMA buffer": written frames really land here, so the sink costs
    /// what a device's memory copy costs.
    ring: Vec<u8>,
}

impl VirtualPcm {
    /// Opens a virtual PCM with the file's format and aplay's buffer rules.
    pub fn open(fmt: StreamFormat, req: &BufferRequest) -> VirtualPcm {
        let (buffer, period) = super::resolve_frames(req, fmt.rate);
        let frame_bytes = fmt.format.bytes() * fmt.channels as usize;
        VirtualPcm {
            setup: Setup {
                backend: Backend::Virtual,
                device: "virtual".into(),
                hardware: false,
                clock: ClockSource::Virtual,
                format: fmt.format,
                rate: fmt.rate,
                channels: fmt.channels as u32,
                buffer_frames: buffer,
                period_frames: period,
                start_threshold: buffer,
                stop_threshold: buffer,
                notes: Vec::new(),
            },
            frame_bytes,
            state: State::Prepared,
            trigger: 0,
            appl: 0,
            ring: vec![fmt.format.silence_byte(); buffer as usize * frame_bytes],
        }
    }

    /// Frames the device has consumed at `now` (while running).
    fn hw_at(&self, now: MonoNs) -> u64 {
        let elapsed = (now - self.trigger).max(0) as i128;
        let played = (elapsed * self.setup.rate as i128 / 1_000_000_000) as u64;
        played.min(self.appl)
    }

    /// The moment the free space reaches the stop threshold: the underrun.
    fn xrun_moment(&self) -> MonoNs {
        let at_frames =
            self.appl as i64 - self.setup.buffer_frames as i64 + self.setup.stop_threshold as i64;
        self.trigger + frames_to_ns(at_frames, self.setup.rate)
    }

    /// Advances the simulated device to `now`.
    fn update(&mut self, now: MonoNs) {
        if self.state == State::Running && now >= self.xrun_moment() {
            self.trigger = self.xrun_moment();
            self.state = State::Xrun;
        }
    }

    fn queued(&self, now: MonoNs) -> u64 {
        match self.state {
            State::Running => self.appl - self.hw_at(now),
            State::Prepared => self.appl,
            State::Xrun | State::Stopped => 0,
        }
    }

    /// Next period boundary at which a period of space is free.
    fn next_wake(&self) -> MonoNs {
        let period = self.setup.period_frames;
        let need = (self.appl + period).saturating_sub(self.setup.buffer_frames);
        let boundary = need.div_ceil(period) * period;
        let at = self.trigger + frames_to_ns(boundary as i64, self.setup.rate);
        at.min(self.xrun_moment())
    }

    fn start(&mut self, now: MonoNs) {
        self.state = State::Running;
        self.trigger = now;
    }
}

impl Sink for VirtualPcm {
    fn setup(&self) -> &Setup {
        &self.setup
    }

    fn wait(&mut self) -> Result<(), SinkError> {
        loop {
            let now = clock::now();
            self.update(now);
            match self.state {
                State::Xrun => return Err(SinkError::Xrun),
                State::Prepared | State::Stopped => return Ok(()),
                State::Running => {
                    let free = self.setup.buffer_frames - self.queued(now);
                    if free >= self.setup.period_frames {
                        return Ok(());
                    }
                    if !clock::sleep_until(self.next_wake()) {
                        return Err(SinkError::Interrupted);
                    }
                }
            }
        }
    }

    fn write(&mut self, data: &[u8]) -> Result<usize, SinkError> {
        let frames = (data.len() / self.frame_bytes) as u64;
        loop {
            let now = clock::now();
            self.update(now);
            if self.state == State::Xrun {
                return Err(SinkError::Xrun);
            }
            let free = self.setup.buffer_frames - self.queued(now);
            if free == 0 {
                self.wait()?;
                continue;
            }
            let n = frames.min(free);
            self.copy_into_ring(&data[..n as usize * self.frame_bytes]);
            self.appl += n;
            if self.state == State::Prepared && self.appl >= self.setup.start_threshold {
                self.start(clock::now());
            }
            return Ok(n as usize);
        }
    }

    fn delay(&mut self) -> Option<i64> {
        let now = clock::now();
        self.update(now);
        match self.state {
            State::Xrun => None,
            _ => Some(self.queued(now) as i64),
        }
    }

    fn is_running(&mut self) -> bool {
        self.update(clock::now());
        self.state == State::Running
    }

    fn xrun_stamp(&mut self) -> XrunStamp {
        XrunStamp {
            stopped_at: (self.state == State::Xrun).then_some(self.trigger),
        }
    }

    fn recover(&mut self) -> Result<(), SinkError> {
        self.state = State::Prepared;
        self.appl = 0;
        Ok(())
    }

    fn finish(&mut self, immediately: bool) -> Result<(), SinkError> {
        let now = clock::now();
        self.update(now);
        if !immediately {
            if self.state == State::Prepared && self.appl > 0 {
                // ALSA's drain starts a stream that never reached its threshold.
                self.start(now);
            }
            if self.state == State::Running {
                let end = self.trigger + frames_to_ns(self.appl as i64, self.setup.rate);
                if !clock::sleep_until(end) {
                    return Err(SinkError::Interrupted);
                }
            }
        }
        self.state = State::Stopped;
        Ok(())
    }

    fn describe(&mut self) -> String {
        let s = &self.setup;
        format!(
            "Virtual PCM (simulated device on CLOCK_MONOTONIC, no driver)\n\
             Its setup is:\n  format       : {}\n  channels     : {}\n  rate         : {}\n  \
             buffer_size  : {}\n  period_size  : {}\n  start_threshold  : {}\n  stop_threshold   : {}\n",
            s.format.alsa_name(),
            s.channels,
            s.rate,
            s.buffer_frames,
            s.period_frames,
            s.start_threshold,
            s.stop_threshold
        )
    }
}

impl VirtualPcm {
    fn copy_into_ring(&mut self, bytes: &[u8]) {
        let len = self.ring.len();
        let start = (self.appl as usize * self.frame_bytes) % len;
        let first = bytes.len().min(len - start);
        self.ring[start..start + first].copy_from_slice(&bytes[..first]);
        self.ring[..bytes.len() - first].copy_from_slice(&bytes[first..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xrunbench_schema::SampleFormat;

    fn pcm(buffer_us: u32, period_us: u32) -> VirtualPcm {
        VirtualPcm::open(
            StreamFormat {
                format: SampleFormat::S16Le,
                rate: 48_000,
                channels: 2,
            },
            &BufferRequest {
                buffer_time_us: Some(buffer_us),
                period_time_us: Some(period_us),
                ..Default::default()
            },
        )
    }

    #[test]
    fn starts_at_threshold_and_underruns_exactly_when_dry() {
        let mut p = pcm(20_000, 5_000);
        let period = vec![0u8; 240 * 4];
        for _ in 0..3 {
            assert_eq!(p.write(&period).unwrap(), 240);
            assert!(!p.is_running());
        }
        p.write(&period).unwrap();
        assert!(p.is_running());
        let started = p.trigger;
        // Stall well past the 20 ms of queued audio.
        clock::sleep_until(started + 50_000_000);
        assert!(matches!(p.wait(), Err(SinkError::Xrun)));
        assert_eq!(p.xrun_stamp().stopped_at, Some(started + 20_000_000));
        p.recover().unwrap();
        assert_eq!(p.delay(), Some(0));
    }

    #[test]
    fn ring_wraps_without_losing_bytes() {
        let mut p = pcm(1_000, 250); // 48 frames of 4 bytes
        let chunk: Vec<u8> = (0..8 * 4).map(|i| i as u8 + 1).collect();
        p.appl = 44;
        p.copy_into_ring(&chunk);
        assert_eq!(&p.ring[44 * 4..], &chunk[..16]);
        assert_eq!(&p.ring[..16], &chunk[16..]);
    }
}
