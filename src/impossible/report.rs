//! What `impossible` made of a dataset: the variants, the instances left
//! without one and why, and (after a validation) gold's verdict on each.

use std::collections::BTreeMap;

use serde::Serialize;

use super::validate::Checked;
use super::{Mode, Mutation, Skip};
use crate::table::columns;

#[derive(Debug, Clone, Serialize)]
pub struct Made {
    pub instance_id: String,
    pub mutation: Mutation,
}

#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub instance_id: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub mode: Mode,
    pub dataset: String,
    pub instances: usize,
    pub variants: Vec<Made>,
    pub skipped: Vec<Skipped>,
    /// Set when gold was run on the variants.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Validation {
    pub run_id: String,
    /// Variants kept: the test patch applied and gold fails the changed test.
    pub valid: usize,
    pub checked: Vec<Checked>,
}

impl Report {
    pub fn new(mode: Mode, dataset: String, instances: usize) -> Report {
        Report {
            mode,
            dataset,
            instances,
            variants: Vec::new(),
            skipped: Vec::new(),
            validation: None,
        }
    }

    pub fn skip(&mut self, instance_id: &str, why: &Skip) {
        self.skipped.push(Skipped {
            instance_id: instance_id.to_string(),
            reason: why.to_string(),
        });
    }

    /// Counts by kind of change and by reason, and the invalid variants.
    pub fn table(&self) -> String {
        let mut rows = vec![vec![
            format!("{} variants", self.mode.name()),
            format!("{} of {} instances", self.variants.len(), self.instances),
        ]];
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for v in &self.variants {
            *kinds
                .entry(format!("  change: {}", change_name(v)))
                .or_default() += 1;
        }
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        for s in &self.skipped {
            *reasons.entry(format!("  none: {}", s.reason)).or_default() += 1;
        }
        rows.extend(kinds.into_iter().map(|(k, n)| vec![k, n.to_string()]));
        rows.extend(reasons.into_iter().map(|(k, n)| vec![k, n.to_string()]));
        if let Some(v) = &self.validation {
            rows.push(vec![
                "validated (gold fails the changed test)".into(),
                format!("{} of {}", v.valid, v.checked.len()),
            ]);
            for c in v.checked.iter().filter(|c| !c.valid) {
                rows.push(vec![
                    format!("  invalid {}", c.instance_id),
                    c.problem.clone().unwrap_or_default(),
                ]);
            }
            let beyond = v
                .checked
                .iter()
                .filter(|c| c.valid && !c.also_failed.is_empty())
                .count();
            if beyond > 0 {
                rows.push(vec![
                    "  valid, gold also failing other tests".into(),
                    beyond.to_string(),
                ]);
            }
        }
        columns(&rows, "")
    }
}

fn change_name(v: &Made) -> &'static str {
    use super::python::Change;
    match v.mutation.change {
        Change::ExpectedValue => "expected value",
        Change::Sense => "assertion method swapped",
        Change::Negation => "assertion negated",
    }
}
