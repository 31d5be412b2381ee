//! SVG charts drawn with `plotters` (SVG backend: no fonts or network needed; the text is
//! SVG `<text>` rendered by the browser). Each chart is one `<svg id=… class="pqtls-chart">`.

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use pqtls_core::{Error, Result};

/// One horizontal bar made of stacked segments (series name, value).
pub(crate) struct Bar {
    pub label: String,
    pub segments: Vec<(String, f64)>,
}

const WIDTH: u32 = 1100;
const FONT: &str = "sans-serif";

fn color(i: usize) -> RGBColor {
    let c = Palette99::pick(i).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

fn draw_err(id: &str, e: impl std::fmt::Display) -> Error {
    Error::Other(format!("drawing chart {id}: {e}"))
}

/// Gives the SVG its id and class, and makes it scale to the page width.
fn tag(svg: String, id: &str, title: &str) -> String {
    let title = crate::html::escape(title);
    svg.replacen(
        "<svg ",
        &format!("<svg id=\"{id}\" class=\"pqtls-chart\" role=\"img\" aria-label=\"{title}\" style=\"max-width:100%;height:auto\" "),
        1,
    )
}

fn label_area(labels: impl Iterator<Item = usize>) -> u32 {
    (labels.max().unwrap_or(10) as u32 * 7 + 20).clamp(80, 420)
}

/// Horizontal stacked bars, one per label, segments coloured by series (in `series` order,
/// which is also the legend's order).
pub(crate) fn stacked_bars(id: &str, title: &str, x_desc: &str, bars: &[Bar], series: &[String]) -> Result<String> {
    let n = bars.len().max(1) as i32;
    let height = 110 + 24 * n as u32 + 18 * series.len().div_ceil(4) as u32;
    let xmax = bars.iter().map(|b| b.segments.iter().map(|s| s.1.max(0.0)).sum::<f64>()).fold(0.0, f64::max);
    let xmax = if xmax > 0.0 { xmax * 1.05 } else { 1.0 };
    let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw_err(id, e))?;
        let (plot, legend) = root.split_vertically(height - 18 * series.len().div_ceil(4) as u32 - 10);
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, (FONT, 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(label_area(labels.iter().map(|l| l.chars().count())))
            .build_cartesian_2d(0f64..xmax, (0..n).into_segmented())
            .map_err(|e| draw_err(id, e))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n as usize)
            .y_label_formatter(&|v: &SegmentValue<i32>| match v {
                // Row 0 is at the bottom: the first bar is drawn in the top row.
                SegmentValue::CenterOf(i) => labels.get((n - 1 - *i) as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .x_desc(x_desc)
            .label_style((FONT, 12))
            .draw()
            .map_err(|e| draw_err(id, e))?;
        for (si, name) in series.iter().enumerate() {
            let c = color(si);
            let rects: Vec<Rectangle<(f64, SegmentValue<i32>)>> = bars
                .iter()
                .enumerate()
                .filter_map(|(bi, b)| {
                    let start: f64 = b.segments.iter().take_while(|(s, _)| s != name).map(|(_, v)| v.max(0.0)).sum();
                    let v = b.segments.iter().find(|(s, _)| s == name)?.1.max(0.0);
                    let mut r = Rectangle::new(
                        [
                            (start, SegmentValue::Exact(n - 1 - bi as i32)),
                            (start + v, SegmentValue::Exact(n - bi as i32)),
                        ],
                        c.filled(),
                    );
                    r.set_margin(3, 3, 0, 0);
                    Some(r)
                })
                .collect();
            chart.draw_series(rects).map_err(|e| draw_err(id, e))?;
        }
        // Legend below the plot, four entries a row.
        for (si, name) in series.iter().enumerate() {
            let (col, row) = ((si % 4) as i32, (si / 4) as i32);
            let (x, y) = (20 + col * 270, 4 + row * 18);
            legend
                .draw(&Rectangle::new([(x, y), (x + 12, y + 12)], color(si).filled()))
                .map_err(|e| draw_err(id, e))?;
            legend.draw(&Text::new(name.clone(), (x + 18, y), (FONT, 12))).map_err(|e| draw_err(id, e))?;
        }
        root.present().map_err(|e| draw_err(id, e))?;
    }
    Ok(tag(svg, id, title))
}

/// One line per series (markers of `point_size` when > 0) and a legend.
fn draw_lines<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    id: &str,
    series: &[(String, Vec<(f64, f64)>)],
    point_size: u32,
    legend_at: SeriesLabelPosition,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, (name, points)) in series.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)).point_size(point_size))
            .map_err(|e| draw_err(id, e))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(legend_at)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 12))
        .draw()
        .map_err(|e| draw_err(id, e))
}

/// Lines on linear axes (CDFs): x in the data's range, y from 0 to 1.
pub(crate) fn cdf(id: &str, title: &str, x_desc: &str, series: &[(String, Vec<(f64, f64)>)]) -> Result<String> {
    let xs = series.iter().flat_map(|(_, p)| p.iter().map(|(x, _)| *x));
    let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    let (lo, hi) = if lo.is_finite() && hi > lo { (lo * 0.95, hi * 1.02) } else { (0.0, 1.0) };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw_err(id, e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(lo..hi, 0f64..1.0)
            .map_err(|e| draw_err(id, e))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc("fraction of handshakes ≤ x")
            .label_style((FONT, 12))
            .draw()
            .map_err(|e| draw_err(id, e))?;
        draw_lines(&mut chart, id, series, 0, SeriesLabelPosition::LowerRight)?;
        root.present().map_err(|e| draw_err(id, e))?;
    }
    Ok(tag(svg, id, title))
}

/// Lines on log–log axes with markers (sessions/s vs link rate).
pub(crate) fn log_lines(
    id: &str,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<String> {
    let pts =
        || series.iter().flat_map(|(_, p)| p.iter().copied()).filter(|(x, y)| *x > 0.0 && *y > 0.0 && y.is_finite());
    let (xlo, xhi) = pts().fold((f64::INFINITY, 0f64), |(a, b), (x, _)| (a.min(x), b.max(x)));
    let (ylo, yhi) = pts().fold((f64::INFINITY, 0f64), |(a, b), (_, y)| (a.min(y), b.max(y)));
    let (xlo, xhi) = if xlo.is_finite() && xhi > xlo { (xlo * 0.8, xhi * 1.25) } else { (1.0, 10.0) };
    let (ylo, yhi) = if ylo.is_finite() && yhi > ylo { (ylo * 0.5, yhi * 2.0) } else { (1.0, 10.0) };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw_err(id, e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(90)
            .build_cartesian_2d((xlo..xhi).log_scale(), (ylo..yhi).log_scale())
            .map_err(|e| draw_err(id, e))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .label_style((FONT, 12))
            .y_label_formatter(&|y| crate::rate(*y))
            .draw()
            .map_err(|e| draw_err(id, e))?;
        // A log axis cannot show 0 or ∞.
        let drawable: Vec<(String, Vec<(f64, f64)>)> = series
            .iter()
            .map(|(n, p)| {
                (n.clone(), p.iter().copied().filter(|(x, y)| *x > 0.0 && *y > 0.0 && y.is_finite()).collect())
            })
            .collect();
        draw_lines(&mut chart, id, &drawable, 3, SeriesLabelPosition::UpperLeft)?;
        root.present().map_err(|e| draw_err(id, e))?;
    }
    Ok(tag(svg, id, title))
}

/// Horizontal bars from 0 with error bars (deltas with their intervals).
pub(crate) fn delta_bars(id: &str, title: &str, x_desc: &str, rows: &[(String, f64, f64)]) -> Result<String> {
    let n = rows.len().max(1) as i32;
    let height = 100 + 24 * n as u32;
    let lo = rows.iter().map(|(_, d, h)| d - h).fold(0.0, f64::min);
    let hi = rows.iter().map(|(_, d, h)| d + h).fold(0.0, f64::max);
    let pad = ((hi - lo) * 0.05).max(1e-9);
    let labels: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw_err(id, e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(label_area(labels.iter().map(|l| l.chars().count())))
            .build_cartesian_2d((lo - pad)..(hi + pad), (0..n).into_segmented())
            .map_err(|e| draw_err(id, e))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n as usize)
            .y_label_formatter(&|v: &SegmentValue<i32>| match v {
                // Row 0 is at the bottom: the first bar is drawn in the top row.
                SegmentValue::CenterOf(i) => labels.get((n - 1 - *i) as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .x_desc(x_desc)
            .label_style((FONT, 12))
            .draw()
            .map_err(|e| draw_err(id, e))?;
        let up = RGBColor(200, 80, 60);
        let down = RGBColor(60, 140, 80);
        chart
            .draw_series(rows.iter().enumerate().map(|(i, (_, d, _))| {
                let mut r = Rectangle::new(
                    [(0.0, SegmentValue::Exact(n - 1 - i as i32)), (*d, SegmentValue::Exact(n - i as i32))],
                    if *d >= 0.0 { up.filled() } else { down.filled() },
                );
                r.set_margin(4, 4, 0, 0);
                r
            }))
            .map_err(|e| draw_err(id, e))?;
        chart
            .draw_series(rows.iter().enumerate().map(|(i, (_, d, h))| {
                ErrorBar::new_horizontal(
                    SegmentValue::CenterOf(n - 1 - i as i32),
                    d - h,
                    *d,
                    d + h,
                    BLACK.stroke_width(1),
                    8,
                )
            }))
            .map_err(|e| draw_err(id, e))?;
        root.present().map_err(|e| draw_err(id, e))?;
    }
    Ok(tag(svg, id, title))
}

/// One group of horizontal bars: a label and one value per series (with the half-width of its
/// interval, when known), drawn one under the other.
pub(crate) struct BarGroup {
    pub label: String,
    /// (series index, value, half-width).
    pub bars: Vec<(usize, f64, Option<f64>)>,
}

/// Horizontal grouped bars: one group per label, one bar per series inside it (coloured by
/// series, legend below), whiskers where a half-width is given, and a dashed vertical line at
/// `reference` (e.g. 1 for ratios).
pub(crate) fn grouped_bars(
    id: &str,
    title: &str,
    x_desc: &str,
    groups: &[BarGroup],
    series: &[String],
    reference: Option<f64>,
) -> Result<String> {
    let per = series.len().max(1) as i32;
    // Each group: a row per series, then a gap row.
    let rows = (groups.len().max(1) as i32) * (per + 1);
    let legend_rows = series.len().div_ceil(4) as u32;
    let height = 110 + 9 * rows as u32 + 18 * legend_rows;
    let xmax = groups
        .iter()
        .flat_map(|g| g.bars.iter().map(|(_, v, h)| v.max(0.0) + h.unwrap_or(0.0)))
        .chain(reference)
        .fold(0.0, f64::max);
    let xmax = if xmax > 0.0 { xmax * 1.05 } else { 1.0 };
    let labels: Vec<String> = groups.iter().map(|g| g.label.clone()).collect();
    // Row r (0 at the bottom) of bar j in group i.
    let row = |i: usize, j: usize| rows - 1 - (i as i32 * (per + 1) + j as i32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw_err(id, e))?;
        let (plot, legend) = root.split_vertically(height - 18 * legend_rows - 10);
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, (FONT, 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(label_area(labels.iter().map(|l| l.chars().count())))
            .build_cartesian_2d(0f64..xmax, (0..rows).into_segmented())
            .map_err(|e| draw_err(id, e))?;
        let middle = (per - 1) / 2;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows as usize)
            .y_label_formatter(&|v: &SegmentValue<i32>| match v {
                SegmentValue::CenterOf(r) => {
                    let from_top = rows - 1 - *r;
                    let (g, j) = (from_top / (per + 1), from_top % (per + 1));
                    if j == middle {
                        labels.get(g as usize).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                }
                _ => String::new(),
            })
            .x_desc(x_desc)
            .label_style((FONT, 12))
            .draw()
            .map_err(|e| draw_err(id, e))?;
        for (i, g) in groups.iter().enumerate() {
            let rects: Vec<Rectangle<(f64, SegmentValue<i32>)>> = g
                .bars
                .iter()
                .map(|(s, v, _)| {
                    let r = row(i, *s);
                    let mut rect = Rectangle::new(
                        [(0.0, SegmentValue::Exact(r)), (v.max(0.0), SegmentValue::Exact(r + 1))],
                        color(*s).filled(),
                    );
                    rect.set_margin(1, 1, 0, 0);
                    rect
                })
                .collect();
            chart.draw_series(rects).map_err(|e| draw_err(id, e))?;
            let whiskers: Vec<_> = g
                .bars
                .iter()
                .filter_map(|(s, v, h)| {
                    let h = (*h)?;
                    Some(ErrorBar::new_horizontal(
                        SegmentValue::CenterOf(row(i, *s)),
                        v - h,
                        *v,
                        v + h,
                        BLACK.stroke_width(1),
                        6,
                    ))
                })
                .collect();
            chart.draw_series(whiskers).map_err(|e| draw_err(id, e))?;
        }
        if let Some(x) = reference {
            chart
                .draw_series(DashedLineSeries::new(
                    [(x, SegmentValue::Exact(0)), (x, SegmentValue::Exact(rows))],
                    6,
                    4,
                    BLACK.stroke_width(1),
                ))
                .map_err(|e| draw_err(id, e))?;
        }
        for (si, name) in series.iter().enumerate() {
            let (col, r) = ((si % 4) as i32, (si / 4) as i32);
            let (x, y) = (20 + col * 270, 4 + r * 18);
            legend
                .draw(&Rectangle::new([(x, y), (x + 12, y + 12)], color(si).filled()))
                .map_err(|e| draw_err(id, e))?;
            legend.draw(&Text::new(name.clone(), (x + 18, y), (FONT, 12))).map_err(|e| draw_err(id, e))?;
        }
        root.present().map_err(|e| draw_err(id, e))?;
    }
    Ok(tag(svg, id, title))
}

/// Lines with markers on linear axes from 0 (TTLB against RTT): one colour per series, the
/// solid line its `points` (e.g. medians), and a dashed line of the same colour its `upper`
/// points when given (e.g. p95).
pub(crate) fn lines(id: &str, title: &str, x_desc: &str, y_desc: &str, series: &[Curve]) -> Result<String> {
    let all = || series.iter().flat_map(|s| s.points.iter().chain(s.upper.iter()).copied());
    let xmax = all().map(|p| p.0).filter(|x| x.is_finite()).fold(0.0, f64::max);
    let ymax = all().map(|p| p.1).filter(|y| y.is_finite()).fold(0.0, f64::max);
    let xmax = if xmax > 0.0 { xmax * 1.05 } else { 1.0 };
    let ymax = if ymax > 0.0 { ymax * 1.08 } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw_err(id, e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)
            .map_err(|e| draw_err(id, e))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .label_style((FONT, 12))
            .draw()
            .map_err(|e| draw_err(id, e))?;
        for (i, s) in series.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)).point_size(3))
                .map_err(|e| draw_err(id, e))?
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
            if !s.upper.is_empty() {
                chart
                    .draw_series(DashedLineSeries::new(s.upper.iter().copied(), 5, 4, c.stroke_width(1)))
                    .map_err(|e| draw_err(id, e))?;
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FONT, 12))
            .draw()
            .map_err(|e| draw_err(id, e))?;
        root.present().map_err(|e| draw_err(id, e))?;
    }
    Ok(tag(svg, id, title))
}

/// One series of [`lines`].
pub(crate) struct Curve {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub upper: Vec<(f64, f64)>,
}
