//! The order evaluations start in. With N workers, a run ends when its last
//! evaluation does: one long test suite started last leaves the other
//! workers idle while it runs. So evaluations whose tests took longest in
//! earlier runs start first (longest processing time first), and those
//! never seen before start before all of them, in input order (they may
//! need image builds, and nothing is known of them).
//!
//! A free worker takes the first of this order whose version is not still
//! preparing its environment (`super::preparing`).
//!
//! What earlier runs took is `<cache>/durations.json`: per instance id, the
//! seconds its tests took the last time they ran (`timings.tests`, the same
//! cold or warm). Plain code; the engine loads it before a run and records
//! the run's evaluations after it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::jobs::{Job, Records};
use crate::key::EvalKey;

#[derive(Debug, thiserror::Error)]
pub enum DurationsError {
    #[error("test durations {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("test durations {path} is not valid JSON: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct DurationsFile {
    /// Seconds, by instance id.
    tests: BTreeMap<String, f64>,
}

/// Test seconds per instance, from earlier runs of one cache folder.
#[derive(Debug, Default)]
pub struct Durations {
    path: PathBuf,
    tests: BTreeMap<String, f64>,
}

impl Durations {
    /// The durations at `path`; none yet is an empty set.
    pub fn load(path: &Path) -> Result<Durations, DurationsError> {
        let tests = match std::fs::read(path) {
            Ok(bytes) => {
                serde_json::from_slice::<DurationsFile>(&bytes)
                    .map_err(|source| DurationsError::Json {
                        path: path.to_owned(),
                        source,
                    })?
                    .tests
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => {
                return Err(DurationsError::Io {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        Ok(Durations {
            path: path.to_owned(),
            tests,
        })
    }

    /// An empty set that saves to `path` (to replace an unreadable file).
    pub fn empty(path: &Path) -> Durations {
        Durations {
            path: path.to_owned(),
            tests: BTreeMap::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn get(&self, instance_id: &str) -> Option<f64> {
        self.tests.get(instance_id).copied()
    }

    /// Takes the test seconds of every record whose tests ran and that
    /// `whole_suite` says ran the instance's own tests.
    pub fn record(&mut self, records: &Records, whole_suite: impl Fn(&EvalKey) -> bool) {
        for (key, rec) in records {
            if rec.timings.tests > 0.0 && whole_suite(key) {
                self.tests
                    .insert(key.instance_id.clone(), rec.timings.tests);
            }
        }
    }

    /// Writes the set atomically, over what a run that ended meanwhile
    /// wrote (its other instances are kept).
    pub fn save(&mut self) -> Result<(), DurationsError> {
        if let Ok(disk) = Durations::load(&self.path) {
            for (id, secs) in disk.tests {
                self.tests.entry(id).or_insert(secs);
            }
        }
        let text = serde_json::to_vec(&DurationsFile {
            tests: self.tests.clone(),
        })
        .map_err(|source| DurationsError::Json {
            path: self.path.clone(),
            source,
        })?;
        crate::rundir::atomic::write_atomic(&self.path, &text).map_err(|source| {
            DurationsError::Io {
                path: self.path.clone(),
                source,
            }
        })
    }
}

/// Puts job groups in start order: never-seen instances first (input
/// order), then the longest earlier tests first; ties keep input order.
pub fn order(groups: &mut [(Job, Vec<Job>)], durations: &Durations) {
    groups.sort_by(|(a, _), (b, _)| {
        let key = |j: &Job| durations.get(&j.instance.instance_id);
        match (key(a), key(b)) {
            (None, None) => std::cmp::Ordering::Equal,
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (Some(x), Some(y)) => y.total_cmp(&x),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{Instance, Prediction};
    use std::sync::Arc;

    fn job(id: &str) -> (Job, Vec<Job>) {
        let instance: Instance = serde_json::from_value(serde_json::json!({
            "instance_id": id, "repo": "acme/widgets", "base_commit": "0".repeat(40),
        }))
        .unwrap();
        let prediction = Prediction::new(id, "m", Some("diff".into()));
        (Job::new(Arc::new(instance), prediction), Vec::new())
    }

    fn ids(groups: &[(Job, Vec<Job>)]) -> Vec<&str> {
        groups
            .iter()
            .map(|(j, _)| j.instance.instance_id.as_str())
            .collect()
    }

    #[test]
    fn unknown_first_in_input_order_then_longest_first() {
        let mut d = Durations::default();
        d.tests.insert("short".into(), 2.0);
        d.tests.insert("long".into(), 90.0);
        d.tests.insert("mid".into(), 30.0);
        let mut groups = vec![
            job("short"),
            job("new-a"),
            job("mid"),
            job("long"),
            job("new-b"),
        ];
        order(&mut groups, &d);
        assert_eq!(ids(&groups), ["new-a", "new-b", "long", "mid", "short"]);
    }

    #[test]
    fn only_whole_suite_runs_whose_tests_ran_are_recorded() {
        let mut records = Records::new();
        for (id, sample, secs) in [
            ("full", None, 40.0),
            ("chosen", Some("s"), 3.0),
            ("none", None, 0.0),
        ] {
            let mut rec =
                crate::record::EvalRecord::new(id, "m", crate::settings::BackendKind::Local);
            rec.timings.tests = secs;
            records.insert(EvalKey::new("m", id, sample), Box::new(rec));
        }
        let mut d = Durations::default();
        d.tests.insert("chosen".into(), 50.0);
        d.record(&records, |key| key.sample_id.is_none());
        assert_eq!(d.get("full"), Some(40.0));
        assert_eq!(
            d.get("chosen"),
            Some(50.0),
            "a run of chosen tests keeps the suite's time"
        );
        assert_eq!(d.get("none"), None, "no tests ran: nothing known");
    }

    #[test]
    fn no_durations_keeps_input_order() {
        let mut groups = vec![job("c"), job("a"), job("b")];
        order(&mut groups, &Durations::default());
        assert_eq!(ids(&groups), ["c", "a", "b"]);
    }

    #[test]
    fn saved_durations_merge_with_a_run_that_ended_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("durations.json");
        let mut first = Durations::load(&path).unwrap();
        first.tests.insert("a".into(), 5.0);
        let mut second = Durations::load(&path).unwrap();
        first.save().unwrap();
        second.tests.insert("b".into(), 7.0);
        second.tests.insert("a".into(), 6.0);
        second.save().unwrap();
        let back = Durations::load(&path).unwrap();
        assert_eq!(back.get("a"), Some(6.0), "this run's value wins");
        assert_eq!(back.get("b"), Some(7.0));
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(
            Durations::load(&path),
            Err(DurationsError::Json { .. })
        ));
    }
}
