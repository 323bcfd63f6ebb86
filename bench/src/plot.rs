//! Plain SVG charts (no plotting dependency): latency distributions on a log axis, ratios, and
//! write throughput.

use std::fmt::Write as _;

pub struct Series {
    pub label: String,
    /// Sorted latencies in ms.
    pub e2e: Vec<f64>,
    pub sql: Vec<f64>,
    pub ratio_p50: f64,
    pub ratio_p95: f64,
}

const E2E: &str = "#d9480f";
const SQL: &str = "#1c7ed6";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn q(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// One row per workload and two strips (end to end, SQL alone): every sample as a faint tick, a
/// box from p25 to p75, and marks at p50, p95 and p99. Log-scale x axis in ms.
pub fn latency(series: &[Series]) -> String {
    let (left, right, row_h, top) = (330.0, 40.0, 46.0, 40.0);
    let width = 1100.0;
    let height = top + row_h * series.len() as f64 + 50.0;
    let all = series.iter().flat_map(|s| s.e2e.iter().chain(&s.sql));
    let lo = all.clone().copied().fold(f64::INFINITY, f64::min).max(0.01);
    let hi = all.copied().fold(0.0, f64::max).max(lo * 10.0);
    let (l0, l1) = (lo.log10().floor(), hi.log10().ceil());
    let x = |ms: f64| left + (ms.max(lo).log10() - l0) / (l1 - l0) * (width - left - right);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="14">Latency per request (ms, log scale): <tspan fill="{E2E}">end to end over HTTP</tspan> vs <tspan fill="{SQL}">the same SQL alone</tspan>; box p25-p75, marks p50 | p95 | p99</text>
"#
    );
    let mut d = l0;
    while d <= l1 {
        let v = 10f64.powf(d);
        let xv = x(v);
        let _ = writeln!(
            s,
            r##"<line x1="{xv}" y1="{top}" x2="{xv}" y2="{}" stroke="#ccc"/><text x="{xv}" y="{}" text-anchor="middle">{}</text>"##,
            height - 40.0,
            height - 25.0,
            if v < 1.0 {
                format!("{v}")
            } else {
                format!("{v:.0}")
            }
        );
        d += 1.0;
    }
    for (i, ser) in series.iter().enumerate() {
        let y0 = top + row_h * i as f64;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            left - 8.0,
            y0 + row_h / 2.0 + 4.0,
            esc(&ser.label)
        );
        for (k, (v, color)) in [(&ser.e2e, E2E), (&ser.sql, SQL)].into_iter().enumerate() {
            let yc = y0 + 12.0 + k as f64 * 18.0;
            let step = (v.len() / 200).max(1);
            for ms in v.iter().step_by(step) {
                let xv = x(*ms);
                let _ = writeln!(
                    s,
                    r#"<line x1="{xv:.1}" y1="{}" x2="{xv:.1}" y2="{}" stroke="{color}" stroke-opacity="0.15"/>"#,
                    yc - 6.0,
                    yc + 6.0
                );
            }
            let (a, b) = (x(q(v, 0.25)), x(q(v, 0.75)));
            let _ = writeln!(
                s,
                r#"<rect x="{a:.1}" y="{}" width="{:.1}" height="10" fill="{color}" fill-opacity="0.35" stroke="{color}"/>"#,
                yc - 5.0,
                (b - a).max(1.0)
            );
            for (p, w) in [(0.5, 3.0), (0.95, 1.5), (0.99, 1.0)] {
                let xv = x(q(v, p));
                let _ = writeln!(
                    s,
                    r#"<line x1="{xv:.1}" y1="{}" x2="{xv:.1}" y2="{}" stroke="{color}" stroke-width="{w}"/>"#,
                    yc - 8.0,
                    yc + 8.0
                );
            }
        }
    }
    s.push_str("</svg>\n");
    s
}

fn bars(
    title: &str,
    rows: &[(String, Vec<(f64, &str)>)],
    unit: &str,
    guide: Option<f64>,
) -> String {
    let (left, right, row_h, top) = (420.0, 90.0, 30.0, 40.0);
    let width = 1100.0;
    let height = top + row_h * rows.len() as f64 + 20.0;
    let max = rows
        .iter()
        .flat_map(|r| r.1.iter().map(|b| b.0))
        .chain(guide)
        .fold(0.0, f64::max)
        .max(1e-9);
    let x = |v: f64| left + v / max * (width - left - right);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="14">{}</text>
"#,
        esc(title)
    );
    for (i, (label, vals)) in rows.iter().enumerate() {
        let y0 = top + row_h * i as f64;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            left - 8.0,
            y0 + row_h / 2.0 + 4.0,
            esc(label)
        );
        let h = (row_h - 8.0) / vals.len() as f64;
        for (k, (v, color)) in vals.iter().enumerate() {
            let y = y0 + 4.0 + h * k as f64;
            let _ = writeln!(
                s,
                r#"<rect x="{left}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{color}"/><text x="{:.1}" y="{:.1}">{v:.2}{unit}</text>"#,
                (x(*v) - left).max(1.0),
                h - 1.0,
                x(*v) + 4.0,
                y + h - 2.0
            );
        }
    }
    if let Some(g) = guide {
        let xv = x(g);
        let _ = writeln!(
            s,
            r#"<line x1="{xv:.1}" y1="{top}" x2="{xv:.1}" y2="{}" stroke="black" stroke-dasharray="4 3"/>"#,
            height - 20.0
        );
    }
    s.push_str("</svg>\n");
    s
}

/// End to end / SQL alone at p50 (dark) and p95 (light), with a dashed line at 1x.
pub fn ratios(series: &[Series]) -> String {
    let rows: Vec<(String, Vec<(f64, &str)>)> = series
        .iter()
        .map(|s| {
            (
                s.label.clone(),
                vec![(s.ratio_p50, "#5f3dc4"), (s.ratio_p95, "#b197fc")],
            )
        })
        .collect();
    bars(
        "End to end / SQL alone: p50 (dark), p95 (light); dashed: 1x",
        &rows,
        "x",
        Some(1.0),
    )
}

pub fn throughput(rows: Vec<(String, f64)>) -> String {
    let rows: Vec<(String, Vec<(f64, &str)>)> = rows
        .into_iter()
        .map(|(l, v)| (l, vec![(v, "#2b8a3e")]))
        .collect();
    bars("Messages per second", &rows, "", None)
}
