//! The charts, drawn with plotters into SVG (no font files: the viewer renders the text): latency
//! distributions end to end vs the SQL alone, the ratios at p50 and p95, and write throughput.

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, SegmentValue, ValueFormatter};
use plotters::prelude::*;

pub struct Series {
    pub label: String,
    /// Sorted latencies in ms.
    pub e2e: Vec<f64>,
    pub sql: Vec<f64>,
    pub ratio_p50: f64,
    pub ratio_p95: f64,
}

const E2E: RGBColor = RGBColor(0xd9, 0x48, 0x0f);
const SQL: RGBColor = RGBColor(0x1c, 0x7e, 0xd6);
const P50: RGBColor = RGBColor(0x5f, 0x3d, 0xc4);
const P95: RGBColor = RGBColor(0xb1, 0x97, 0xfc);
const WRITES: RGBColor = RGBColor(0x2b, 0x8a, 0x3e);

const WIDTH: u32 = 1100;
/// Height of one workload's band, in pixels.
const BAND: u32 = 48;
/// Caption, axis and margins, in pixels.
const FRAME: u32 = 100;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn q(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// Draws with `draw` onto a white SVG canvas with one band per label and returns the SVG; a
/// drawing error is reported and leaves the chart incomplete rather than failing the run.
fn svg(
    bands: usize,
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<()>,
) -> String {
    let mut out = String::new();
    {
        let size = (WIDTH, FRAME + BAND * bands.max(1) as u32);
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let drawn = root
            .fill(&WHITE)
            .map_err(Into::into)
            .and_then(|_| draw(&root))
            .and_then(|_| root.present().map_err(Into::into));
        if let Err(e) = drawn {
            eprintln!("chart: {e}");
        }
    }
    out
}

/// The band of the i-th of n labels; the first label is drawn on top (the y axis counts up).
fn band(i: usize, n: usize) -> i32 {
    (n - 1 - i) as i32
}

/// A chart over `x` with one y band per label, labelled in the middle of the band.
fn chart<'a, 'b, X>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    caption: &str,
    x: X,
    x_desc: &str,
    labels: &[String],
) -> Result<ChartContext<'a, SVGBackend<'b>, Cartesian2d<X::CoordDescType, SegmentedBands>>>
where
    X: AsRangedCoord,
    X::CoordDescType: ValueFormatter<X::Value>,
    X::Value: std::fmt::Debug + 'static,
{
    let n = labels.len();
    let mut chart = ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(320)
        .build_cartesian_2d(x, (0..n.max(1) as i32 - 1).into_segmented())?;
    // A discrete i32 range includes its end: 0..n-1 holds the n bands.
    let name = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(y) => usize::try_from(n as i32 - 1 - y)
            .ok()
            .and_then(|i| labels.get(i))
            .cloned()
            .unwrap_or_default(),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&name)
        .x_desc(x_desc)
        .label_style(("sans-serif", 12))
        .draw()?;
    Ok(chart)
}

type SegmentedBands =
    plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordi32>;

/// One band per workload with two box plots, end to end (orange, upper) and the SQL alone (blue,
/// lower): box p25-p75, a thick mark at the median, whiskers p5-p95, a cross at p99.
pub fn latency(series: &[Series]) -> String {
    let labels: Vec<String> = series.iter().map(|s| s.label.clone()).collect();
    svg(series.len(), |root| {
        let all = series.iter().flat_map(|s| s.e2e.iter().chain(&s.sql));
        // No read workload ran (`--only 14`): an axis of 1-10 ms, where an infinite bound would
        // have the log axis generate ticks until memory ran out.
        let lo = match all.clone().copied().fold(f64::INFINITY, f64::min) {
            lo if lo.is_finite() => lo.max(0.01),
            _ => 1.0,
        };
        let hi = all.copied().fold(0.0, f64::max).max(lo * 10.0);
        let x = (10f32.powi(lo.log10().floor() as i32)..10f32.powi(hi.log10().ceil() as i32))
            .log_scale();
        let chart = chart(
            root,
            "Latency per request: end to end over HTTP (orange) vs the same SQL alone (blue); \
             box p25-p75, bar p50, whiskers p5-p95, x p99",
            x,
            "ms (log scale)",
            &labels,
        )?;
        let n = series.len();
        for (i, s) in series.iter().enumerate() {
            for (values, color, offset) in [(&s.e2e, E2E, -9), (&s.sql, SQL, 9)] {
                if values.is_empty() {
                    continue;
                }
                // Positions in pixels: the box's height is in pixels, not in data units.
                let px = |p: f64| {
                    let (x, y) = chart.backend_coord(&(
                        q(values, p).max(lo) as f32,
                        SegmentValue::CenterOf(band(i, n)),
                    ));
                    (x, y + offset)
                };
                let line = ShapeStyle::from(color).stroke_width(1);
                let ((x5, y), (x25, _), (x50, _)) = (px(0.05), px(0.25), px(0.5));
                let ((x75, _), (x95, _), (x99, _)) = (px(0.75), px(0.95), px(0.99));
                root.draw(&Rectangle::new(
                    [(x25, y - 6), (x75, y + 6)],
                    color.mix(0.25).filled(),
                ))?;
                root.draw(&Rectangle::new([(x25, y - 6), (x75, y + 6)], line))?;
                root.draw(&PathElement::new(
                    vec![(x50, y - 8), (x50, y + 8)],
                    line.stroke_width(3),
                ))?;
                for (a, b) in [(x5, x25), (x75, x95)] {
                    root.draw(&PathElement::new(vec![(a, y), (b, y)], line))?;
                }
                for end in [x5, x95] {
                    root.draw(&PathElement::new(vec![(end, y - 4), (end, y + 4)], line))?;
                }
                root.draw(&Cross::new((x99, y), 4, line.stroke_width(2)))?;
            }
        }
        Ok(())
    })
}

/// Horizontal bars, one band per label and one bar per value in it.
fn bars(
    caption: &str,
    unit: &str,
    decimals: usize,
    rows: &[(String, Vec<(f64, RGBColor)>)],
    guide: Option<f64>,
) -> String {
    let labels: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    svg(rows.len(), |root| {
        let max = rows
            .iter()
            .flat_map(|r| r.1.iter().map(|b| b.0))
            .chain(guide)
            .fold(0.0, f64::max)
            .max(1e-9) as f32;
        let mut chart = chart(root, caption, 0f32..max * 1.15, unit, &labels)?;
        let n = rows.len();
        for (i, (_, values)) in rows.iter().enumerate() {
            let y = band(i, n);
            let k = values.len().max(1) as u32;
            // Each bar takes an equal share of the band's height, 4 px apart.
            let share = (BAND - 8) / k;
            for (j, &(v, color)) in values.iter().enumerate() {
                let j = j as u32;
                let (top, bottom) = (4 + j * share, 4 + (k - 1 - j) * share);
                let bar = Rectangle::new(
                    [
                        (0f32, SegmentValue::Exact(y + 1)),
                        (v as f32, SegmentValue::Exact(y)),
                    ],
                    color.filled(),
                );
                let mut bar = bar;
                bar.set_margin(top, bottom, 0, 0);
                chart.draw_series(std::iter::once(bar))?;
                chart.draw_series(std::iter::once(
                    EmptyElement::at((v as f32, SegmentValue::Exact(y + 1)))
                        + Text::new(
                            format!("{v:.decimals$}"),
                            (4, (top + share / 2) as i32 - 6),
                            ("sans-serif", 11),
                        ),
                ))?;
            }
        }
        if let Some(g) = guide {
            let g = g as f32;
            chart.draw_series(LineSeries::new(
                [
                    (g, SegmentValue::Exact(0)),
                    (g, SegmentValue::Exact(n as i32)),
                ],
                BLACK.stroke_width(1),
            ))?;
        }
        Ok(())
    })
}

/// End to end / SQL alone at p50 (dark) and p95 (light), with a line at 1x.
pub fn ratios(series: &[Series]) -> String {
    let rows: Vec<(String, Vec<(f64, RGBColor)>)> = series
        .iter()
        .map(|s| {
            (
                s.label.clone(),
                vec![(s.ratio_p50, P50), (s.ratio_p95, P95)],
            )
        })
        .collect();
    bars(
        "End to end / SQL alone: p50 (dark), p95 (light); the line is 1x",
        "ratio",
        2,
        &rows,
        Some(1.0),
    )
}

pub fn throughput(rows: Vec<(String, f64)>) -> String {
    let rows: Vec<(String, Vec<(f64, RGBColor)>)> = rows
        .into_iter()
        .map(|(l, v)| (l, vec![(v, WRITES)]))
        .collect();
    bars("Write throughput", "messages/s", 0, &rows, None)
}

/// Recall per system (one band each): recall@10 with any evidence (dark) and within the snippets'
/// context (light), for `make eval`.
#[allow(dead_code)] // only honcho-eval draws it
pub fn recall(rows: &[(String, f64, f64)]) -> String {
    let rows: Vec<(String, Vec<(f64, RGBColor)>)> = rows
        .iter()
        .map(|(l, at10, ctx)| (l.clone(), vec![(*at10, P50), (*ctx, P95)]))
        .collect();
    bars(
        "Recall@10, any evidence (dark) and within snippet context w=2 (light)",
        "recall",
        3,
        &rows,
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_chart_of_no_workloads_is_an_empty_chart_not_an_endless_axis() {
        let svg = latency(&[]);
        assert!(svg.contains("<svg"), "{svg}");
    }
}
