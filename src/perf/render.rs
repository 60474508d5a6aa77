//! Reports of perf measurements: the summary table (text), and Markdown
//! with one SVG per instance showing the per-round times of every variant
//! (points, IQR box, median line; dropped outliers hollow), in the style of
//! the pass@k report's plots.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use plotters::prelude::*;

use super::record::{PerfRecord, Role};
use super::{Aggregate, Metric, Status, VariantResult};

const FONT: &str = "sans-serif";
const PALETTE: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

fn role(r: Role) -> &'static str {
    match r {
        Role::Base => "base",
        Role::BaseCopy => "base (A/A)",
        Role::Gold => "gold",
        Role::Candidate => "candidate",
    }
}

fn status(s: &Status) -> String {
    match s {
        Status::Reference => "reference".into(),
        Status::Scored => "scored".into(),
        Status::NotCredited { reason } => format!("not credited: {reason}"),
        Status::NotScored { reason } => format!("not scored: {reason}"),
        Status::Suspect { reasons } => {
            let r: Vec<&str> = reasons.iter().map(|r| r.as_str()).collect();
            format!("suspect: {}", r.join(", "))
        }
    }
}

/// The integrity evidence of an instance's variants, one line per refusal.
fn evidence(r: &PerfRecord) -> Vec<String> {
    r.analysis
        .variants
        .iter()
        .flat_map(|v| v.integrity.iter().map(move |x| format!("{}: {x}", v.name)))
        .collect()
}

/// One row's cells: variant, role, n, median, IQR, speedup [CI], p, verdict,
/// vs expert, status.
fn cells(v: &VariantResult) -> Vec<String> {
    let (n, med, iqr) = match &v.stats {
        Some(s) => (
            format!("{}/{}", s.times.len() - s.dropped.len(), s.times.len()),
            format!("{:.4}", s.median),
            format!("{:.4}", s.q3 - s.q1),
        ),
        None => ("-".into(), "-".into(), "-".into()),
    };
    let (speedup, p, verdict, expert) = match &v.comparison {
        Some(c) => (
            format!(
                "{:.3} [{:.3}, {:.3}]",
                c.speedup.point, c.speedup.low, c.speedup.high
            ),
            format!("{:.2e}", c.p_faster.min(c.p_slower)),
            c.verdict.as_str().to_string(),
            c.relative_to_expert
                .map(|r| format!("{r:.2}"))
                .unwrap_or_else(|| "-".into()),
        ),
        None => ("-".into(), "-".into(), "-".into(), "-".into()),
    };
    let name = match &v.model {
        Some(m) => format!("{} ({m})", v.name),
        None => v.name.clone(),
    };
    vec![
        name,
        role(v.role).into(),
        n,
        med,
        iqr,
        speedup,
        p,
        verdict,
        expert,
        status(&v.status),
    ]
}

const HEADER: [&str; 10] = [
    "variant",
    "role",
    "n",
    "median s",
    "IQR s",
    "speedup [95% CI]",
    "p (1-sided)",
    "verdict",
    "vs expert",
    "status",
];

/// The summary table: one block per instance, aligned columns.
pub fn table(records: &[PerfRecord]) -> String {
    let mut out = String::new();
    for r in records {
        let a = &r.analysis;
        let floor = a
            .noise_floor
            .map(|f| format!("noise floor {:.1}%", 100.0 * f))
            .unwrap_or_else(|| "noise floor unknown".into());
        let _ = writeln!(
            out,
            "{}  ({} x {} rounds, {}{}{})",
            r.instance_id,
            r.items.len(),
            r.repeat,
            floor,
            if a.too_noisy { ", TOO NOISY" } else { "" },
            if a.under_load { ", under load" } else { "" }
        );
        let rows: Vec<Vec<String>> = std::iter::once(HEADER.map(String::from).to_vec())
            .chain(a.variants.iter().map(cells))
            .collect();
        let widths: Vec<usize> = (0..HEADER.len())
            .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        for row in &rows {
            let line: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            let _ = writeln!(out, "  {}", line.join("  ").trim_end());
        }
        for e in evidence(r) {
            let _ = writeln!(out, "  suspect {e}");
        }
        for n in &a.notes {
            let _ = writeln!(out, "  note: {n}");
        }
    }
    out
}

/// The per-round times of each variant of one instance, one row per
/// variant (top to bottom in input order). Returns the SVG text.
pub fn distribution_svg(record: &PerfRecord) -> Result<String, PlotError> {
    let vs: Vec<&VariantResult> = record
        .analysis
        .variants
        .iter()
        .filter(|v| v.stats.is_some())
        .collect();
    let n = vs.len().max(1);
    let all: Vec<f64> = vs
        .iter()
        .flat_map(|v| {
            v.stats
                .as_ref()
                .map(|s| s.times.clone())
                .unwrap_or_default()
        })
        .collect();
    let max = all.iter().copied().fold(0.0f64, f64::max).max(1e-6) * 1.08;
    let labels: Vec<String> = vs.iter().map(|v| v.name.clone()).collect();
    let label_area = (labels.iter().map(|l| l.chars().count()).max().unwrap_or(4) as u32 * 8 + 16)
        .clamp(60, 300);
    let unit = match record.options.metric {
        Metric::Wall => "wall time per round (s)",
        Metric::Cpu => "CPU time per round (s)",
        Metric::Reported => "workload-reported time per round (s)",
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, (n as u32 * 44 + 130).min(4000)))
            .into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&record.instance_id, (FONT, 18))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(label_area)
            .build_cartesian_2d(0f64..max, (0..n as u32).into_segmented())
            .map_err(err)?;
        let row = |i: usize| (n - 1 - i) as u32;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .light_line_style(TRANSPARENT)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .x_desc(unit)
            .y_labels(n)
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(s) => (n - 1)
                    .checked_sub(*s as usize)
                    .and_then(|i| labels.get(i))
                    .cloned()
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .draw()
            .map_err(err)?;
        for (i, v) in vs.iter().enumerate() {
            let Some(s) = &v.stats else { continue };
            let color = PALETTE[i % PALETTE.len()];
            let mut bx = Rectangle::new(
                [
                    (s.q1, SegmentValue::Exact(row(i))),
                    (
                        s.q3.max(s.q1 + max * 0.002),
                        SegmentValue::Exact(row(i) + 1),
                    ),
                ],
                color.mix(0.2).filled(),
            );
            bx.set_margin(8, 8, 0, 0);
            chart.draw_series(std::iter::once(bx)).map_err(err)?;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![
                        (s.median, SegmentValue::Exact(row(i))),
                        (s.median, SegmentValue::Exact(row(i) + 1)),
                    ],
                    BLACK.stroke_width(2),
                )))
                .map_err(err)?;
            let mut dropped = s.dropped.clone();
            chart
                .draw_series(s.times.iter().map(|&t| {
                    let hollow = match dropped.iter().position(|&d| d == t) {
                        Some(k) => {
                            dropped.remove(k);
                            true
                        }
                        None => false,
                    };
                    let style = if hollow {
                        color.stroke_width(1)
                    } else {
                        color.filled()
                    };
                    Circle::new((t, SegmentValue::CenterOf(row(i))), 4, style)
                }))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

// (Also `passk::plot::PlotError`: each plotter says its own failure.)
/// A plot could not be drawn (a plotters error, as text).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the perf plot: {0}")]
pub struct PlotError(String);

fn err(e: impl std::fmt::Display) -> PlotError {
    PlotError(e.to_string())
}

fn opt_pct(x: Option<f64>) -> String {
    x.map(|v| format!("{:.0}%", 100.0 * v))
        .unwrap_or_else(|| "-".into())
}

/// The Markdown report and its SVG files: `(file name, contents)` pairs,
/// `perf.md` first, then `perf-<n>.svg` per instance in input order (the
/// caller writes them into the run folder).
pub fn report_files(
    title: &str,
    records: &[PerfRecord],
    aggregates: &BTreeMap<String, Aggregate>,
) -> Result<Vec<(String, String)>, PlotError> {
    let mut md = format!("# {title}\n\n");
    let mut files = Vec::new();
    if let Some(first) = records.first() {
        let o = &first.options;
        let _ = writeln!(
            md,
            "Rules: {:?} time per round (sum over the workload's items); outliers: {}; \
             Mann–Whitney U {:?}, one-sided, α = {}; minimum effect {:.0}%; speedup = \
             median(base) ÷ median(variant), 95% bootstrap interval ({} resamples, seed {}); \
             reaching the expert = at least {:.0}% of gold's speedup.\n",
            o.metric,
            o.outliers.describe(),
            o.mwu,
            o.verdict.alpha,
            100.0 * o.verdict.min_effect,
            o.resamples,
            o.bootstrap_seed,
            100.0 * o.expert_fraction,
        );
        let f = &first.fingerprint;
        let _ = writeln!(
            md,
            "Machine: {} ({} cores, {} allowed), {}; instructions: {}.\n",
            f.cpu_model,
            f.cores.map_or("?".into(), |c| c.to_string()),
            f.cpus_allowed.map_or("?".into(), |c| c.to_string()),
            f.kernel,
            f.instructions
        );
    }
    if !aggregates.is_empty() {
        md.push_str("| group | variants | scored | not credited (suspect) | faster | slower | no change | reaching expert | hmean vs expert | hmean vs expert (all) |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for (k, a) in aggregates {
            let _ = writeln!(
                md,
                "| {k} | {} | {} | {} ({}) | {} ({}) | {} ({}) | {} | {} | {} | {} |",
                a.variants,
                a.scored,
                a.not_credited,
                a.suspect,
                a.faster,
                opt_pct(a.share_faster),
                a.slower,
                opt_pct(a.share_slower),
                a.unchanged,
                opt_pct(a.share_reaching_expert),
                a.hmean_relative_to_expert
                    .map_or("-".into(), |v| format!("{v:.3}")),
                a.hmean_relative_to_expert_all
                    .map_or("-".into(), |v| format!("{v:.3}")),
            );
        }
        md.push('\n');
    }
    for (i, r) in records.iter().enumerate() {
        let name = format!("perf-{}.svg", i + 1);
        let _ = writeln!(md, "## {}\n", r.instance_id);
        md.push_str("| ");
        md.push_str(&HEADER.join(" | "));
        md.push_str(" |\n|");
        md.push_str(&"---|".repeat(HEADER.len()));
        md.push('\n');
        for v in &r.analysis.variants {
            let c: Vec<String> = cells(v).iter().map(|c| c.replace('|', "\\|")).collect();
            let _ = writeln!(md, "| {} |", c.join(" | "));
        }
        md.push('\n');
        for e in evidence(r) {
            let _ = writeln!(md, "- suspect {e}");
        }
        for n in &r.analysis.notes {
            let _ = writeln!(md, "- {n}");
        }
        let _ = writeln!(md, "\n![{}]({name})\n", r.instance_id);
        files.push((name, distribution_svg(r)?));
    }
    files.insert(0, ("perf.md".to_string(), md));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::super::record::{DriverOutput, Fingerprint, RunSample, VariantInfo};
    use super::super::workload::WorkloadSource;
    use super::super::{aggregate, analyse, AnalysisOptions};
    use super::*;

    fn record() -> PerfRecord {
        let fp = Fingerprint {
            cpu_model: "cpu".into(),
            cores: Some(2),
            cpus_allowed: Some(1),
            kernel: "Linux".into(),
            python: "3.11".into(),
            load_before: None,
            load_after: None,
            driver_rss_kb: None,
            instructions: "unavailable: no PMU".into(),
            own_timer: None,
            defences: None,
        };
        let mut runs = Vec::new();
        for (name, t) in [("base", 0.4), ("gold", 0.1), ("cand|1", 0.45)] {
            for round in 0..8 {
                let wall = t * (1.0 + 0.01 * round as f64) + if round == 7 { 1.0 } else { 0.0 };
                runs.push(RunSample {
                    variant: name.into(),
                    item: "w".into(),
                    item_index: 0,
                    round,
                    position: 0,
                    wall_s: wall,
                    user_s: wall,
                    sys_s: 0.0,
                    cpu_s: wall,
                    max_rss_kb: 1,
                    exit_code: Some(0),
                    signal: None,
                    timed_out: false,
                    instructions: None,
                    reported_s: None,
                    output_tail: None,
                    evidence: Default::default(),
                });
            }
        }
        let variants = vec![
            VariantInfo {
                name: "base".into(),
                role: Role::Base,
                model: None,
                resolved: None,
            },
            VariantInfo {
                name: "gold".into(),
                role: Role::Gold,
                model: None,
                resolved: Some(true),
            },
            VariantInfo {
                name: "cand|1".into(),
                role: Role::Candidate,
                model: Some("m".into()),
                resolved: Some(true),
            },
        ];
        let out = DriverOutput {
            fingerprint: fp,
            builds: vec![],
            warmups: vec![],
            runs,
            sweep: None,
        };
        let options = AnalysisOptions::default();
        let analysis = analyse(&variants, &out, 1, 8, true, &options);
        PerfRecord {
            schema_version: super::super::record::SCHEMA_VERSION,
            instance_id: "o__r-1".into(),
            workload_source: WorkloadSource::Workload,
            items: vec!["w".into()],
            repeat: 8,
            warmup: 1,
            seed: 1,
            cpuset: Some("1".into()),
            options,
            variants,
            fingerprint: out.fingerprint,
            builds: vec![],
            warmups: vec![],
            runs: out.runs,
            elapsed_s: None,
            overhead_per_run_s: None,
            sweep: None,
            analysis,
        }
    }

    #[test]
    fn table_has_one_row_per_variant() {
        let t = table(&[record()]);
        assert!(
            t.starts_with("o__r-1  (1 x 8 rounds, noise floor unknown)"),
            "{t}"
        );
        let gold = t
            .lines()
            .find(|l| l.trim_start().starts_with("gold"))
            .unwrap();
        assert!(gold.contains("faster") && gold.contains("scored"), "{gold}");
        assert!(t.contains("cand|1 (m)"));
        assert!(t.contains("note: no A/A measurement"));
    }

    #[test]
    fn markdown_and_svg() {
        let r = record();
        let agg = aggregate([&r.analysis]);
        let files = report_files("perf demo", &[r], &agg).unwrap();
        assert_eq!(files.len(), 2);
        let (name, md) = &files[0];
        assert_eq!(name, "perf.md");
        assert!(md.contains("outliers: IQR fences, k = 1"));
        assert!(md.contains("| gold | 1 | 1 | 0 (0) | 1 (100%)"), "{md}");
        assert!(md.contains("cand\\|1 (m)"), "pipes escaped");
        assert!(md.contains("![o__r-1](perf-1.svg)"));
        let svg = &files[1].1;
        assert!(svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // 3 variants x 8 rounds of points; each variant's slow 8th round is
        // an outlier, drawn hollow (no fill).
        assert_eq!(svg.matches("<circle").count(), 24, "points");
        let hollow = svg
            .lines()
            .filter(|l| l.starts_with("<circle") && l.contains("fill=\"none\""))
            .count();
        assert_eq!(hollow, 3, "hollow outliers");
        assert!(svg.contains("wall time per round (s)"));
    }
}
