//! SVG charts drawn with `plotters` (SVG backend: no fonts or network needed; the text is
//! SVG `<text>` rendered by the browser). Each chart is one `<svg id=… class="pqtls-chart">`.

use plotters::coord::ranged1d::{AsRangedCoord, SegmentValue, ValueFormatter};
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

/// The width of a bar chart's label area: room for the longest of `labels`.
fn label_area(labels: &[String]) -> u32 {
    (labels.iter().map(|l| l.chars().count()).max().unwrap_or(10) as u32 * 7 + 20).clamp(80, 420)
}

/// A chart's plotting context on the SVG backend.
type Chart<'c, 's, X, Y> = ChartContext<'c, SVGBackend<'s>, Cartesian2d<X, Y>>;

/// How a chart's y axis is labelled.
enum YAxis<'f, V> {
    /// Its numbers, and this description.
    Values(&'f str),
    /// Numbers written by the function, and this description.
    Formatted(&'f str, &'f dyn Fn(&V) -> String),
    /// Bars: one label per row (this many rows), named by the function; no horizontal grid.
    Rows(usize, &'f dyn Fn(&V) -> String),
}

/// The frame every chart is drawn in: an SVG [`WIDTH`] × `height` on white, the title as its
/// caption, the axes with their labels, and — for bar charts — the series as colour boxes
/// below the plot, four a row (line charts name theirs inside the plot).
struct Frame<'f> {
    id: &'f str,
    title: &'f str,
    height: u32,
    /// Space around the plot, px.
    margin: u32,
    /// Width of the y axis' labels, px.
    y_label_area: u32,
    x_desc: &'f str,
    /// The series named below the plot; `None`: no legend there.
    boxes: Option<&'f [String]>,
    /// Where the series' labels go inside the plot (line charts); `None`: none there.
    labels_at: Option<SeriesLabelPosition>,
}

impl Frame<'_> {
    /// A bar chart's frame: rows labelled on the left as wide as `labels` need.
    fn bars<'f>(id: &'f str, title: &'f str, height: u32, x_desc: &'f str, labels: &[String]) -> Frame<'f> {
        Frame { id, title, height, margin: 10, y_label_area: label_area(labels), x_desc, boxes: None, labels_at: None }
    }

    /// A line chart's frame, 480 px high, its series' labels inside the plot `at`.
    fn lines<'f>(
        id: &'f str,
        title: &'f str,
        x_desc: &'f str,
        y_label_area: u32,
        at: SeriesLabelPosition,
    ) -> Frame<'f> {
        Frame { id, title, height: 480, margin: 15, y_label_area, x_desc, boxes: None, labels_at: Some(at) }
    }

    /// Draws the frame over the axes `x` × `y`, then `body` in it; returns the tagged SVG.
    fn draw<X, Y>(
        self,
        x: X,
        y: Y,
        y_axis: YAxis<'_, <Y::CoordDescType as Ranged>::ValueType>,
        body: impl FnOnce(&mut Chart<'_, '_, X::CoordDescType, Y::CoordDescType>) -> Result<()>,
    ) -> Result<String>
    where
        X: AsRangedCoord,
        Y: AsRangedCoord,
        X::CoordDescType: ValueFormatter<<X::CoordDescType as Ranged>::ValueType>,
        Y::CoordDescType: ValueFormatter<<Y::CoordDescType as Ranged>::ValueType>,
    {
        let id = self.id;
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (WIDTH, self.height)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| draw_err(id, e))?;
            let split;
            let (plot, legend) = match self.boxes {
                Some(series) => {
                    split = root.split_vertically(self.height - 18 * series.len().div_ceil(4) as u32 - 10);
                    (&split.0, Some((&split.1, series)))
                }
                None => (&root, None),
            };
            let mut chart = ChartBuilder::on(plot)
                .caption(self.title, (FONT, 18))
                .margin(self.margin)
                .x_label_area_size(40)
                .y_label_area_size(self.y_label_area)
                .build_cartesian_2d(x, y)
                .map_err(|e| draw_err(id, e))?;
            let mut mesh = chart.configure_mesh();
            mesh.x_desc(self.x_desc).label_style((FONT, 12));
            match y_axis {
                YAxis::Values(desc) => {
                    mesh.y_desc(desc);
                }
                YAxis::Formatted(desc, f) => {
                    mesh.y_desc(desc).y_label_formatter(f);
                }
                YAxis::Rows(n, f) => {
                    mesh.disable_y_mesh().y_labels(n).y_label_formatter(f);
                }
            }
            mesh.draw().map_err(|e| draw_err(id, e))?;
            body(&mut chart)?;
            if let Some(at) = self.labels_at {
                chart
                    .configure_series_labels()
                    .position(at)
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .label_font((FONT, 12))
                    .draw()
                    .map_err(|e| draw_err(id, e))?;
            }
            if let Some((area, series)) = legend {
                for (si, name) in series.iter().enumerate() {
                    let (col, row) = ((si % 4) as i32, (si / 4) as i32);
                    let (x, y) = (20 + col * 270, 4 + row * 18);
                    area.draw(&Rectangle::new([(x, y), (x + 12, y + 12)], color(si).filled()))
                        .map_err(|e| draw_err(id, e))?;
                    area.draw(&Text::new(name.clone(), (x + 18, y), (FONT, 12))).map_err(|e| draw_err(id, e))?;
                }
            }
            root.present().map_err(|e| draw_err(id, e))?;
        }
        Ok(tag(svg, id, self.title))
    }
}

/// The y labels of horizontal bars, one per row: the first bar is drawn in the top row (row 0
/// is at the bottom).
fn top_down(labels: &[String]) -> impl Fn(&SegmentValue<i32>) -> String + '_ {
    let n = labels.len().max(1) as i32;
    move |v| match v {
        SegmentValue::CenterOf(i) => labels.get((n - 1 - *i) as usize).cloned().unwrap_or_default(),
        _ => String::new(),
    }
}

/// Horizontal stacked bars, one per label, segments coloured by series (in `series` order,
/// which is also the legend's order).
pub(crate) fn stacked_bars(id: &str, title: &str, x_desc: &str, bars: &[Bar], series: &[String]) -> Result<String> {
    let n = bars.len().max(1) as i32;
    let height = 110 + 24 * n as u32 + 18 * series.len().div_ceil(4) as u32;
    let xmax = bars.iter().map(|b| b.segments.iter().map(|s| s.1.max(0.0)).sum::<f64>()).fold(0.0, f64::max);
    let xmax = if xmax > 0.0 { xmax * 1.05 } else { 1.0 };
    let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    let frame = Frame { boxes: Some(series), ..Frame::bars(id, title, height, x_desc, &labels) };
    let y_labels = top_down(&labels);
    frame.draw(0f64..xmax, (0..n).into_segmented(), YAxis::Rows(n as usize, &y_labels), |chart| {
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
        Ok(())
    })
}

/// Horizontal stacked bars whose segments may be negative: from 0, positive segments stack to
/// the right and negative ones to the left, each coloured by series (legend below); a
/// vertical line at 0.
pub(crate) fn diverging_bars(id: &str, title: &str, x_desc: &str, bars: &[Bar], series: &[String]) -> Result<String> {
    let n = bars.len().max(1) as i32;
    let height = 110 + 24 * n as u32 + 18 * series.len().div_ceil(4) as u32;
    let sum =
        |b: &Bar, positive: bool| -> f64 { b.segments.iter().map(|s| s.1).filter(|v| (*v > 0.0) == positive).sum() };
    let hi = bars.iter().map(|b| sum(b, true)).fold(0.0, f64::max);
    let lo = bars.iter().map(|b| sum(b, false)).fold(0.0, f64::min);
    let pad = ((hi - lo) * 0.04).max(1.0);
    let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    let frame = Frame { boxes: Some(series), ..Frame::bars(id, title, height, x_desc, &labels) };
    let y_labels = top_down(&labels);
    frame.draw((lo - pad)..(hi + pad), (0..n).into_segmented(), YAxis::Rows(n as usize, &y_labels), |chart| {
        for (bi, b) in bars.iter().enumerate() {
            let (mut right, mut left) = (0.0, 0.0);
            let mut rects = Vec::new();
            for (si, name) in series.iter().enumerate() {
                let Some(v) = b.segments.iter().find(|(s, _)| s == name).map(|s| s.1) else { continue };
                if v == 0.0 || !v.is_finite() {
                    continue;
                }
                let (start, end) = if v > 0.0 {
                    right += v;
                    (right - v, right)
                } else {
                    left += v;
                    (left - v, left)
                };
                let mut r = Rectangle::new(
                    [(start, SegmentValue::Exact(n - 1 - bi as i32)), (end, SegmentValue::Exact(n - bi as i32))],
                    color(si).filled(),
                );
                r.set_margin(3, 3, 0, 0);
                rects.push(r);
            }
            chart.draw_series(rects).map_err(|e| draw_err(id, e))?;
        }
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, SegmentValue::Exact(0)), (0.0, SegmentValue::Exact(n))],
                4,
                3,
                BLACK.stroke_width(1),
            ))
            .map_err(|e| draw_err(id, e))?;
        Ok(())
    })
}

/// One line per curve (markers of `point_size` when > 0; its `upper` points dashed in the
/// same colour), labelled for the frame's legend inside the plot.
fn draw_curves<X, Y>(chart: &mut Chart<'_, '_, X, Y>, id: &str, series: &[Curve], point_size: u32) -> Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)).point_size(point_size))
            .map_err(|e| draw_err(id, e))?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        if !s.upper.is_empty() {
            chart
                .draw_series(DashedLineSeries::new(s.upper.iter().copied(), 5, 4, c.stroke_width(1)))
                .map_err(|e| draw_err(id, e))?;
        }
    }
    Ok(())
}

/// Named point lists as curves without an upper line.
fn curves(series: &[(String, Vec<(f64, f64)>)]) -> Vec<Curve> {
    series
        .iter()
        .map(|(name, points)| Curve { name: name.clone(), points: points.clone(), upper: Vec::new() })
        .collect()
}

/// Values spanning more than this ratio get a logarithmic axis: on a linear one the small ones
/// would share its first few pixels.
pub(crate) const LOG_SPAN: f64 = 10.0;

/// Lines of CDFs: x in the data's range — logarithmic when it spans more than [`LOG_SPAN`] (every
/// line stays readable), else linear — and y from 0 to 1.
pub(crate) fn cdf(id: &str, title: &str, x_desc: &str, series: &[(String, Vec<(f64, f64)>)]) -> Result<String> {
    let xs = series.iter().flat_map(|(_, p)| p.iter().map(|(x, _)| *x));
    let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    let frame = Frame::lines(id, title, x_desc, 60, SeriesLabelPosition::LowerRight);
    let y = YAxis::Values("fraction of handshakes ≤ x");
    if lo.is_finite() && lo > 0.0 && hi / lo > LOG_SPAN {
        let x_desc = format!("{x_desc} (logarithmic)");
        let frame = Frame { x_desc: &x_desc, ..frame };
        return frame
            .draw((lo * 0.9..hi * 1.1).log_scale(), 0f64..1.0, y, |chart| draw_curves(chart, id, &curves(series), 0));
    }
    let (lo, hi) = if lo.is_finite() && hi > lo { (lo * 0.95, hi * 1.02) } else { (0.0, 1.0) };
    frame.draw(lo..hi, 0f64..1.0, y, |chart| draw_curves(chart, id, &curves(series), 0))
}

/// Lines on log–log axes with markers (sessions/s vs link rate).
pub(crate) fn log_lines(
    id: &str,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<String> {
    // A log axis cannot show 0 or ∞.
    let drawable = |(x, y): &(f64, f64)| *x > 0.0 && *y > 0.0 && y.is_finite();
    let pts = || series.iter().flat_map(|(_, p)| p.iter().copied()).filter(drawable);
    let (xlo, xhi) = pts().fold((f64::INFINITY, 0f64), |(a, b), (x, _)| (a.min(x), b.max(x)));
    let (ylo, yhi) = pts().fold((f64::INFINITY, 0f64), |(a, b), (_, y)| (a.min(y), b.max(y)));
    let (xlo, xhi) = if xlo.is_finite() && xhi > xlo { (xlo * 0.8, xhi * 1.25) } else { (1.0, 10.0) };
    let (ylo, yhi) = if ylo.is_finite() && yhi > ylo { (ylo * 0.5, yhi * 2.0) } else { (1.0, 10.0) };
    let frame = Frame { height: 520, ..Frame::lines(id, title, x_desc, 90, SeriesLabelPosition::UpperLeft) };
    let rate = |y: &f64| crate::tables::rate(*y);
    frame.draw((xlo..xhi).log_scale(), (ylo..yhi).log_scale(), YAxis::Formatted(y_desc, &rate), |chart| {
        let shown: Vec<(String, Vec<(f64, f64)>)> =
            series.iter().map(|(n, p)| (n.clone(), p.iter().copied().filter(drawable).collect())).collect();
        draw_curves(chart, id, &curves(&shown), 3)
    })
}

/// Horizontal bars from 0 with error bars (deltas with their intervals).
pub(crate) fn delta_bars(id: &str, title: &str, x_desc: &str, rows: &[(String, f64, f64)]) -> Result<String> {
    let n = rows.len().max(1) as i32;
    let height = 100 + 24 * n as u32;
    let lo = rows.iter().map(|(_, d, h)| d - h).fold(0.0, f64::min);
    let hi = rows.iter().map(|(_, d, h)| d + h).fold(0.0, f64::max);
    let pad = ((hi - lo) * 0.05).max(1e-9);
    let labels: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let frame = Frame::bars(id, title, height, x_desc, &labels);
    let y_labels = top_down(&labels);
    frame.draw((lo - pad)..(hi + pad), (0..n).into_segmented(), YAxis::Rows(n as usize, &y_labels), |chart| {
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
        Ok(())
    })
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
    let height = 110 + 9 * rows as u32 + 18 * series.len().div_ceil(4) as u32;
    let xmax = groups
        .iter()
        .flat_map(|g| g.bars.iter().map(|(_, v, h)| v.max(0.0) + h.unwrap_or(0.0)))
        .chain(reference)
        .fold(0.0, f64::max);
    let xmax = if xmax > 0.0 { xmax * 1.05 } else { 1.0 };
    let labels: Vec<String> = groups.iter().map(|g| g.label.clone()).collect();
    // Row r (0 at the bottom) of bar j in group i.
    let row = |i: usize, j: usize| rows - 1 - (i as i32 * (per + 1) + j as i32);
    let middle = (per - 1) / 2;
    // A group's label on its middle bar.
    let y_labels = |v: &SegmentValue<i32>| match v {
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
    };
    let frame = Frame { boxes: Some(series), ..Frame::bars(id, title, height, x_desc, &labels) };
    frame.draw(0f64..xmax, (0..rows).into_segmented(), YAxis::Rows(rows as usize, &y_labels), |chart| {
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
        Ok(())
    })
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
    let frame = Frame::lines(id, title, x_desc, 70, SeriesLabelPosition::UpperLeft);
    frame.draw(0f64..xmax, 0f64..ymax, YAxis::Values(y_desc), |chart| draw_curves(chart, id, series, 3))
}

/// One series of [`lines`].
pub(crate) struct Curve {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub upper: Vec<(f64, f64)>,
}
