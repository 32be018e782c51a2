//! The plan: which configuration runs in which trial slot.

use serde::{Deserialize, Serialize};

use crate::Order;

/// One trial slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedTrial {
    /// Position in the run, 1-based.
    pub seq: usize,
    /// Index of the configuration in the scenario.
    pub config: usize,
    /// Name of the configuration.
    pub config_name: String,
    /// Trial number within the configuration, 1-based.
    pub k: u32,
}

impl PlannedTrial {
    /// `<config>-<k>`: the trial's file stem.
    pub fn stem(&self) -> String {
        format!("{}-{}", self.config_name, self.k)
    }
}

/// Lays out `trials` trials of each configuration: interleaved
/// (A B A B …, so slow drift of the machine hits every configuration alike)
/// or blocked (A A … B B …).
pub fn make_plan(configs: &[String], trials: u32, order: Order) -> Vec<PlannedTrial> {
    let pairs: Vec<(usize, u32)> = match order {
        Order::Interleaved => (1..=trials)
            .flat_map(|k| (0..configs.len()).map(move |c| (c, k)))
            .collect(),
        Order::Blocked => (0..configs.len())
            .flat_map(|c| (1..=trials).map(move |k| (c, k)))
            .collect(),
    };
    pairs
        .into_iter()
        .enumerate()
        .map(|(i, (c, k))| PlannedTrial {
            seq: i + 1,
            config: c,
            config_name: configs[c].clone(),
            k,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(plan: &[PlannedTrial]) -> Vec<String> {
        plan.iter().map(|t| t.stem()).collect()
    }

    #[test]
    fn interleaved_alternates_configurations() {
        let p = make_plan(&["a".into(), "b".into()], 3, Order::Interleaved);
        assert_eq!(names(&p), ["a-1", "b-1", "a-2", "b-2", "a-3", "b-3"]);
        assert_eq!(
            p.iter().map(|t| t.seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
    }

    #[test]
    fn blocked_runs_each_configuration_in_turn() {
        let p = make_plan(&["a".into(), "b".into(), "c".into()], 2, Order::Blocked);
        assert_eq!(names(&p), ["a-1", "a-2", "b-1", "b-2", "c-1", "c-2"]);
    }

    #[test]
    fn single_configuration_and_single_trial() {
        let p = make_plan(&["only".into()], 1, Order::Interleaved);
        assert_eq!(names(&p), ["only-1"]);
    }
}
