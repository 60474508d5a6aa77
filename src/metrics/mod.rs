//! pass@k, pass^k and confidence intervals over many samples per instance.
//!
//! Pure, synchronous statistics for reports:
//! - [`estimators`], per-instance unbiased estimators `pass_at_k` (Chen et
//!   al. 2021) and `pass_hat_k` (tau-bench), computed as products so large
//!   `n` never overflows; metric names (`metric_key`: `"pass@5"`, `"pass^5"`);
//! - [`aggregate`], `mean_pass_at_k` / `mean_pass_hat_k` over an
//!   `InstanceSamples` table, withholding the value unless every instance has
//!   `n >= k`, and summaries with intervals;
//! - [`bootstrap`], `bootstrap_ci` (95% percentile bootstrap over instances)
//!   and `paired_diff` (paired bootstrap for two runs on the same instances),
//!   deterministic given a seed via the in-crate [`rng::SplitMix64`].
//!
//! Everything report-facing is `serde::Serialize`.

pub mod aggregate;
pub mod bootstrap;
pub mod estimators;
pub mod rng;

/// Why a statistic could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricsError {
    /// No values / instances to aggregate.
    #[error("no values to aggregate")]
    EmptySample,
    /// A bootstrap was requested with zero resamples.
    #[error("bootstrap needs at least one resample")]
    ZeroResamples,
    /// `values[index]` is NaN or infinite.
    #[error("value at index {index} is not finite")]
    NonFiniteValue {
        /// Position of the first offending value.
        index: usize,
    },
    /// An instance score is NaN or infinite.
    #[error("run {run}: score of instance {instance_id} is not finite")]
    NonFiniteScore {
        /// `"a"` or `"b"`.
        run: &'static str,
        /// The offending instance.
        instance_id: String,
    },
    /// A run lists the same instance more than once.
    #[error("run {run} lists instance ids more than once: {}", list_ids(.instance_ids))]
    DuplicateInstance {
        /// `"a"` or `"b"`.
        run: &'static str,
        /// Repeated ids, sorted.
        instance_ids: Vec<String>,
    },
    /// A paired comparison was asked for runs over different instance sets.
    #[error(
        "runs cover different instances: only in a: [{}]; only in b: [{}]",
        list_ids(.only_in_a),
        list_ids(.only_in_b)
    )]
    InstanceMismatch {
        /// Ids present only in run A, sorted.
        only_in_a: Vec<String>,
        /// Ids present only in run B, sorted.
        only_in_b: Vec<String>,
    },
    /// The per-instance estimate is undefined for some instance (see
    /// [`aggregate::PassAtK::note`]).
    #[error("{metric} cannot be estimated: {reason}")]
    NotEstimable {
        /// Report key, e.g. `"pass@5"`.
        metric: String,
        /// Human-readable explanation.
        reason: String,
    },
}

/// Error messages name at most this many ids; the error fields keep all.
const MAX_IDS_IN_MESSAGE: usize = 20;

fn list_ids(ids: &[String]) -> String {
    let mut out = ids
        .iter()
        .take(MAX_IDS_IN_MESSAGE)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > MAX_IDS_IN_MESSAGE {
        out.push_str(&format!(
            ", ... and {} more",
            ids.len() - MAX_IDS_IN_MESSAGE
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_id_lists_are_truncated_in_messages_only() {
        let ids: Vec<String> = (0..25).map(|i| format!("id-{i:02}")).collect();
        let err = MetricsError::InstanceMismatch {
            only_in_a: ids.clone(),
            only_in_b: vec![],
        };
        let msg = err.to_string();
        assert!(msg.contains("id-19") && !msg.contains("id-20"), "{msg}");
        assert!(msg.contains("and 5 more"), "{msg}");
        assert!(
            matches!(err, MetricsError::InstanceMismatch { only_in_a, .. } if only_in_a == ids)
        );
    }
}
