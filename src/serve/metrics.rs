//! /metrics: the board's counts in the Prometheus text format (0.0.4).

use std::fmt::Write;

use super::state::{Board, BUCKETS};
use crate::backend::docker::images::Tier;
use crate::outcome::Outcome;

/// The text /metrics serves.
pub fn render(board: &Board, draining: bool) -> String {
    let c = &board.counters;
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, value: f64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
        );
    };
    gauge(
        "patchgrade_queue_depth",
        "Accepted evaluations waiting for a worker.",
        board.queued() as f64,
    );
    gauge(
        "patchgrade_running",
        "Evaluations running now.",
        board.running() as f64,
    );
    gauge(
        "patchgrade_draining",
        "1 while the service shuts down (no new submissions).",
        f64::from(u8::from(draining)),
    );
    let _ = writeln!(
        out,
        "# HELP patchgrade_accepted_total Evaluations accepted (new or queued again).\n# TYPE patchgrade_accepted_total counter\npatchgrade_accepted_total {}",
        c.accepted
    );
    let _ = writeln!(
        out,
        "# HELP patchgrade_finished_total Evaluations finished, by outcome.\n# TYPE patchgrade_finished_total counter"
    );
    for outcome in Outcome::ALL {
        let n = c.finished.get(&outcome).copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "patchgrade_finished_total{{outcome=\"{outcome}\"}} {n}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP patchgrade_cancelled_total Evaluations cancelled by their client.\n# TYPE patchgrade_cancelled_total counter\npatchgrade_cancelled_total {}",
        c.cancelled
    );
    let _ = writeln!(
        out,
        "# HELP patchgrade_cache_hits_total Results reused from the run folder (same inputs).\n# TYPE patchgrade_cache_hits_total counter\npatchgrade_cache_hits_total {}",
        c.reused
    );
    for (name, what, counts) in [
        (
            "patchgrade_image_cache_hits_total",
            "Docker image lookups that found the image, by tier.",
            &c.image_hits,
        ),
        (
            "patchgrade_image_cache_misses_total",
            "Docker image lookups that built the image, by tier.",
            &c.image_misses,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {what}\n# TYPE {name} counter");
        for tier in Tier::ALL {
            let n = counts.get(&tier).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}{{tier=\"{}\"}} {n}", tier.name());
        }
    }
    let _ = writeln!(
        out,
        "# HELP patchgrade_refused_total Submissions refused, by reason.\n# TYPE patchgrade_refused_total counter"
    );
    for (reason, n) in &c.refused {
        let _ = writeln!(out, "patchgrade_refused_total{{reason=\"{reason}\"}} {n}");
    }
    let name = "patchgrade_evaluation_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Seconds per evaluation (reused results not counted).\n# TYPE {name} histogram"
    );
    for (le, n) in BUCKETS.iter().zip(c.seconds_buckets) {
        let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {n}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", c.seconds_count);
    let _ = writeln!(out, "{name}_sum {}", c.seconds_sum);
    let _ = writeln!(out, "{name}_count {}", c.seconds_count);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rundir::serve::Accepted;
    use crate::serve::state::Plan;

    #[test]
    fn counts_and_the_histogram_in_prometheus_text() {
        let mut b = Board::new(4, 1);
        let a = Accepted::new("i", "m", None, Some("x"), Default::default());
        b.admit(a.clone(), Plan::New);
        b.admit(
            Accepted::new("j", "m", None, Some("x"), Default::default()),
            Plan::New,
        );
        b.start_next();
        b.finish(&a.id, Outcome::Resolved, 1.5, false, None);
        b.counters.refuse("queue_full");
        b.counters.image(Tier::Env, true);
        b.counters.image(Tier::Instance, true);
        b.counters.image(Tier::Instance, true);
        b.counters.image(Tier::Instance, false);
        let text = render(&b, false);
        for line in [
            "patchgrade_queue_depth 1",
            "patchgrade_running 0",
            "patchgrade_accepted_total 2",
            "patchgrade_finished_total{outcome=\"resolved\"} 1",
            "patchgrade_finished_total{outcome=\"infra_error\"} 0",
            "patchgrade_refused_total{reason=\"queue_full\"} 1",
            "patchgrade_evaluation_seconds_bucket{le=\"1\"} 0",
            "patchgrade_evaluation_seconds_bucket{le=\"2\"} 1",
            "patchgrade_evaluation_seconds_bucket{le=\"+Inf\"} 1",
            "patchgrade_evaluation_seconds_sum 1.5",
            "patchgrade_image_cache_hits_total{tier=\"base\"} 0",
            "patchgrade_image_cache_hits_total{tier=\"env\"} 1",
            "patchgrade_image_cache_hits_total{tier=\"instance\"} 2",
            "patchgrade_image_cache_misses_total{tier=\"instance\"} 1",
            "patchgrade_image_cache_misses_total{tier=\"env\"} 0",
            "# TYPE patchgrade_image_cache_hits_total counter",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
    }
}
