//! SVG plots for the pass@k report: estimate curves with their interval
//! bands, and horizontal bars with interval whiskers.
//!
//! Drawn with `plotters` built with only its SVG backend: no font files or
//! system libraries are needed, the SVG names a font family and the viewer
//! renders the text.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One point of a curve: an estimate and its 95% interval.
#[derive(Debug, Clone, PartialEq)]
pub struct BandPoint {
    pub k: u64,
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

/// A named curve over k; its band is shaded when `band` is set.
#[derive(Debug, Clone)]
pub struct Curve {
    pub label: String,
    pub points: Vec<BandPoint>,
    pub band: bool,
}

/// One bar: a group's estimate with its 95% interval.
#[derive(Debug, Clone)]
pub struct Bar {
    pub label: String,
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

// (Also `perf::render::PlotError`: each plotter says its own failure.)
/// A plot could not be drawn (a plotters error, as text).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the plot: {0}")]
pub struct PlotError(String);

fn err(e: impl std::fmt::Display) -> PlotError {
    PlotError(e.to_string())
}

const PALETTE: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

const FONT: &str = "sans-serif";

/// Curves of estimates against k (x from 1 to the largest k), y in [0, 1],
/// each with its shaded interval band; the legend is drawn beside the chart
/// so it never hides a curve. Returns the SVG text.
pub fn curves(title: &str, y_desc: &str, curves: &[Curve]) -> Result<String, PlotError> {
    let k_max = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.k))
        .max()
        .unwrap_or(1)
        .max(2);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (820, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root.titled(title, (FONT, 20)).map_err(err)?;
        let (left, right) = root.split_horizontally(680);
        let mut chart = ChartBuilder::on(&left)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(0.8f64..(k_max as f64 + 0.2), 0f64..1.0f64)
            .map_err(err)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .x_desc("k")
            .y_desc(y_desc)
            .x_labels(k_max.min(12) as usize)
            .x_label_formatter(&|x| {
                if (x - x.round()).abs() < 1e-9 {
                    format!("{}", x.round() as i64)
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| format!("{y:.1}"))
            .draw()
            .map_err(err)?;
        for (i, c) in curves.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            if c.band && !c.points.is_empty() {
                let mut outline: Vec<(f64, f64)> =
                    c.points.iter().map(|p| (p.k as f64, p.high)).collect();
                outline.extend(c.points.iter().rev().map(|p| (p.k as f64, p.low)));
                chart
                    .draw_series(std::iter::once(Polygon::new(outline, color.mix(0.18))))
                    .map_err(err)?;
            }
            let line: Vec<(f64, f64)> = c.points.iter().map(|p| (p.k as f64, p.value)).collect();
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
                .map_err(err)?;
            chart
                .draw_series(line.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(err)?;
            // Legend entry: a swatch (line over its band) and the label.
            let y = 40 + 26 * i as i32;
            if c.band {
                right
                    .draw(&Rectangle::new(
                        [(4, y - 7), (30, y + 7)],
                        color.mix(0.18).filled(),
                    ))
                    .map_err(err)?;
            }
            right
                .draw(&PathElement::new(
                    vec![(4, y), (30, y)],
                    color.stroke_width(2),
                ))
                .map_err(err)?;
            right
                .draw(&Text::new(
                    c.label.clone(),
                    (36, y),
                    (FONT, 14)
                        .into_font()
                        .color(&BLACK)
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                ))
                .map_err(err)?;
        }
        let note_y = 44 + 26 * curves.len() as i32;
        right
            .draw(&Text::new(
                "bands: 95% CI",
                (4, note_y),
                (FONT, 12)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Horizontal bars (one per group, top to bottom in input order) on [0, 1]
/// with 95% interval whiskers. Returns the SVG text.
pub fn bars(title: &str, x_desc: &str, bars: &[Bar]) -> Result<String, PlotError> {
    let n = bars.len().max(1);
    let longest = bars
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(4);
    let label_area = (longest as u32 * 8 + 16).clamp(60, 360);
    let height = (n as u32 * 30 + 130).min(4000);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 20))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(label_area)
            .build_cartesian_2d(0f64..1.0f64, (0..n as u32).into_segmented())
            .map_err(err)?;
        // Row i (top to bottom) is segment n-1-i, so the input order reads
        // downwards.
        let row = |i: usize| (n - 1 - i) as u32;
        let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .light_line_style(TRANSPARENT)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .x_desc(x_desc)
            .y_labels(n)
            .x_label_formatter(&|x| format!("{x:.1}"))
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
        let color = PALETTE[0];
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let mut r = Rectangle::new(
                    [
                        (0.0, SegmentValue::Exact(row(i))),
                        (b.value, SegmentValue::Exact(row(i) + 1)),
                    ],
                    color.mix(0.75).filled(),
                );
                r.set_margin(5, 5, 0, 0);
                r
            }))
            .map_err(err)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                PathElement::new(
                    vec![
                        (b.low, SegmentValue::CenterOf(row(i))),
                        (b.high, SegmentValue::CenterOf(row(i))),
                    ],
                    BLACK.stroke_width(2),
                )
            }))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// plotters writes each text on its own line inside `<text>`.
    fn has_text(svg: &str, t: &str) -> bool {
        svg.contains(&format!(">\n{t}\n</text>"))
    }

    fn well_formed(svg: &str) {
        assert!(svg.trim_start().starts_with("<svg"), "{}", &svg[..80]);
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn curve_svg_has_the_series_and_the_band() {
        let pts = |off: f64| {
            (1..=4)
                .map(|k| BandPoint {
                    k,
                    value: 0.2 * k as f64 - off,
                    low: 0.15 * k as f64 - off,
                    high: 0.22 * k as f64 - off,
                })
                .collect::<Vec<_>>()
        };
        let svg = curves(
            "demo & <run>",
            "estimate",
            &[
                Curve {
                    label: "pass@k".into(),
                    points: pts(0.0),
                    band: true,
                },
                Curve {
                    label: "pass^k".into(),
                    points: pts(0.1),
                    band: false,
                },
            ],
        )
        .unwrap();
        well_formed(&svg);
        assert!(
            has_text(&svg, "pass@k") && has_text(&svg, "pass^k"),
            "legend"
        );
        assert!(has_text(&svg, "demo &amp; &lt;run&gt;"), "title escaped");
        assert_eq!(svg.matches("<polygon").count(), 1, "one band");
    }

    #[test]
    fn bar_svg_names_every_group() {
        let b = |label: &str, v: f64| Bar {
            label: label.into(),
            value: v,
            low: v / 2.0,
            high: (v * 1.5).min(1.0),
        };
        let svg = bars(
            "pass@1 by repo",
            "pass@1",
            &[b("astropy/astropy", 0.4), b("django/django", 0.7)],
        )
        .unwrap();
        well_formed(&svg);
        assert!(has_text(&svg, "astropy/astropy") && has_text(&svg, "django/django"));
        // Empty input still draws an empty, valid chart.
        well_formed(&bars("none", "pass@1", &[]).unwrap());
    }
}
