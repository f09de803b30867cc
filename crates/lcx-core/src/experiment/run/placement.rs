//! Which node a Slurm cell is pinned to (`[executor] placement`):
//! `same-node` pins every cell to the node the first one landed on,
//! `spread` each round to the node of its first cell, `any` none.

use crate::experiment::plan::{self, Plan};
use crate::store::Run;

/// Which node the next Slurm cell is pinned to (`[executor] placement`).
pub(crate) struct Pinning {
    placement: Option<plan::Placement>,
    /// same-node: the node of the experiment's first Slurm cell.
    node: Option<String>,
    /// spread: the node of the current round (repeat).
    round: Option<(i64, String)>,
}

impl Pinning {
    pub(crate) fn new(plan: &Plan, runs: &[Run]) -> Pinning {
        let placement = match &plan.executor {
            plan::Executor::Slurm(o) => Some(o.placement),
            plan::Executor::Local => None,
        };
        // A resume keeps to the node the earlier cells ran on.
        let node = runs
            .iter()
            .filter(|r| r.slurm_job.is_some())
            .find_map(|r| r.host.clone());
        Pinning {
            placement,
            node,
            round: None,
        }
    }

    pub(crate) fn node_for(&self, repeat: i64) -> Option<String> {
        use plan::Placement;
        match self.placement? {
            Placement::SameNode => self.node.clone(),
            Placement::Spread => self
                .round
                .as_ref()
                .filter(|(r, _)| *r == repeat)
                .map(|(_, n)| n.clone()),
            Placement::Any => None,
        }
    }

    /// Whether the cell about to be submitted for `repeat` decides the
    /// node later cells are pinned to (so a detaching coordinator must
    /// wait until Slurm has placed it).
    pub(crate) fn pins_before(&self, repeat: i64) -> bool {
        use plan::Placement;
        match self.placement {
            Some(Placement::SameNode) => self.node.is_none(),
            Some(Placement::Spread) => self.round.as_ref().is_none_or(|(r, _)| *r != repeat),
            Some(Placement::Any) | None => false,
        }
    }

    pub(crate) fn ran(&mut self, repeat: i64, host: String) {
        if self.placement.is_none() {
            return;
        }
        if self.node.is_none() {
            self.node = Some(host.clone());
        }
        if self.round.as_ref().is_none_or(|(r, _)| *r != repeat) {
            self.round = Some((repeat, host));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::run::testkit;

    fn two_arms(extra: &str) -> Plan {
        testkit::plan(&format!(
            "iterations = 1\nrepeats = 2\n{extra}\n[[arms]]\nname = \"a\"\ncommand = \"true\"\n\
             [[arms]]\nname = \"b\"\ncommand = \"true\""
        ))
    }

    fn pinning(placement: &str) -> Pinning {
        let plan = two_arms(&format!(
            "[executor]\nkind = \"slurm\"\nplacement = \"{placement}\""
        ));
        Pinning::new(&plan, &[])
    }

    #[test]
    fn same_node_pins_every_cell_to_the_first_cells_node() {
        let mut p = pinning("same-node");
        assert_eq!(p.node_for(1), None);
        assert!(p.pins_before(1));
        p.ran(1, "n1".into());
        p.ran(2, "n2".into());
        assert_eq!(p.node_for(1), Some("n1".into()));
        assert_eq!(p.node_for(2), Some("n1".into()));
        assert!(!p.pins_before(3));
    }

    #[test]
    fn spread_pins_each_round_to_its_first_cells_node() {
        let mut p = pinning("spread");
        p.ran(1, "n1".into());
        assert_eq!(p.node_for(1), Some("n1".into()));
        assert_eq!(p.node_for(2), None);
        assert!(p.pins_before(2));
        p.ran(2, "n2".into());
        assert_eq!(p.node_for(2), Some("n2".into()));
    }

    #[test]
    fn any_placement_and_local_cells_are_never_pinned() {
        let mut p = pinning("any");
        p.ran(1, "n1".into());
        assert_eq!(p.node_for(1), None);
        assert!(!p.pins_before(2));
        let mut local = Pinning::new(&two_arms(""), &[]);
        local.ran(1, "here".into());
        assert_eq!(local.node_for(1), None);
    }
}
