//! What a run leaves and what is made of it: run directories written and
//! read back ([`results`]), the statistics ([`stats`]), the mmtests-style
//! comparison table in every format ([`compare`]), plots ([`plot`]), the
//! scenario's gates judged on a run ([`gate`]) and JUnit ([`junit`]).
//!
//! It reads what trials recorded; it runs nothing.

pub mod compare;
pub mod gate;
pub mod junit;
pub mod plot;
pub mod results;
pub mod stats;
