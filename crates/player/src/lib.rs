//! xrun-player library (work in progress).
