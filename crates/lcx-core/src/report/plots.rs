//! SVG plots for archived reports: a metric per iteration per arm (warm-up
//! shaded, each repeat faint and their mean strong), speedup bars with
//! their 95 % intervals, and a log–log line of a cost against batch size.
//! Pure: data in, SVG text out, through plotters' SVG backend only (no
//! fonts or bitmaps needed to draw; `tests` renders them to check).
//!
//! Every plot takes an arm's colour from its place in the plan
//! ([`arm_color`]), so one arm has one colour in every plot of a report.

use plotters::coord::ranged1d::SegmentValue;
use plotters::element::ErrorBar;
use plotters::prelude::*;

use super::stats::Speedup;

/// A plot could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("drawing plot `{title}`: {message}")]
pub struct PlotError {
    pub title: String,
    pub message: String,
}

pub const WIDTH: u32 = 820;
pub const HEIGHT: u32 = 460;

/// Okabe and Ito's colour-blind-safe palette, without its yellow (too
/// little contrast on white).
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
];

/// The colour of the arm at `index` in the plan, the same in every plot.
pub fn arm_color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// One arm's line: its mean over repeats and, with several repeats, each
/// repeat's own points (drawn faintly).
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub arm: String,
    /// The arm's index in the plan (its colour).
    pub color: usize,
    pub mean: Vec<(f64, f64)>,
    pub repeats: Vec<Vec<(f64, f64)>>,
}

/// One speedup bar: the arm, its plan index (colour) and the speedup.
pub type Bar = (String, usize, Speedup);

fn err(title: &str) -> impl Fn(String) -> PlotError + '_ {
    move |message| PlotError {
        title: title.to_string(),
        message,
    }
}

/// The SVG with every hidden control character of a label (a name from a
/// file, a metric a command printed) written as its visible escape:
/// plotters escapes `<` and `&`, but XML has no place for C0 controls, and
/// a bidi control would reorder the text around it.
fn visible_text(svg: String) -> String {
    match crate::escape::terminal(&svg) {
        std::borrow::Cow::Borrowed(_) => svg,
        std::borrow::Cow::Owned(shown) => shown,
    }
}

/// The canvas every plot shares: title, margins, label areas (the y one
/// `y_area` pixels wide).
fn chart_builder<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    title: &str,
    y_area: u32,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.caption(title, ("sans-serif", 20))
        .margin(14)
        .margin_right(28)
        .x_label_area_size(44)
        .y_label_area_size(y_area);
    b
}

/// The legend, in the upper right where every plot leaves room for it.
fn draw_legend<'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    e: &impl Fn(String) -> PlotError,
) -> Result<(), PlotError> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(x.to_string()))
}

fn finite(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
}

/// The y range of the lines, padded, from 0 where the values allow.
fn y_range(lines: &[Line]) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for l in lines {
        for (_, y) in l
            .repeats
            .iter()
            .flat_map(|r| finite(r))
            .chain(finite(&l.mean))
        {
            lo = lo.min(y);
            hi = hi.max(y);
        }
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.08)
        .max(hi.abs().max(lo.abs()) * 0.02)
        .max(1e-9);
    // From 0 where the values allow (a negative series keeps its range);
    // head room for the legend, which sits in the upper right.
    let bottom = if lo >= 0.0 {
        (lo - pad).max(0.0)
    } else {
        lo - pad
    };
    (bottom, hi + pad + (hi - lo + pad) * 0.25)
}

fn legend_label(l: &Line) -> String {
    match l.repeats.len() {
        0 | 1 => l.arm.clone(),
        n => format!("{} (mean of {n} repeats; faint: each)", l.arm),
    }
}

/// One metric per iteration, a line per arm, iterations `1..=warmup`
/// shaded grey. `y_label` should carry the unit.
pub fn iteration_plot(
    title: &str,
    y_label: &str,
    warmup: i64,
    lines: &[Line],
) -> Result<String, PlotError> {
    let x_max = lines
        .iter()
        .flat_map(|l| finite(&l.mean))
        .map(|(x, _)| x)
        .fold(1.0f64, f64::max);
    let x = XAxis {
        label: "iteration",
        range: (0.5, x_max + 0.5),
        ticks: (x_max as usize).clamp(2, 20),
        whole: true,
    };
    line_plot(title, &x, y_label, warmup, lines)
}

/// One metric against the training time it took: x is the cell's elapsed
/// seconds (its iteration times summed) at the iteration of each point, so
/// a faster arm's curve ends further left. No warm-up shade: the warm-up
/// is counted in iterations.
pub fn elapsed_plot(title: &str, y_label: &str, lines: &[Line]) -> Result<String, PlotError> {
    let x_max = lines
        .iter()
        .flat_map(|l| {
            l.repeats
                .iter()
                .flat_map(|r| finite(r))
                .chain(finite(&l.mean))
        })
        .map(|(x, _)| x)
        .fold(1e-9f64, f64::max);
    let x = XAxis {
        label: "training time (s, iteration times summed)",
        range: (0.0, x_max * 1.02),
        ticks: 10,
        whole: false,
    };
    line_plot(title, &x, y_label, 0, lines)
}

struct XAxis {
    label: &'static str,
    range: (f64, f64),
    ticks: usize,
    /// Iterations: labels rounded to whole numbers.
    whole: bool,
}

fn line_plot(
    title: &str,
    x: &XAxis,
    y_label: &str,
    warmup: i64,
    lines: &[Line],
) -> Result<String, PlotError> {
    let e = err(title);
    let (y0, y1) = y_range(lines);
    let (x0, x1) = x.range;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
        let mut chart = chart_builder(&root, title, 78)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|x| e(x.to_string()))?;
        chart
            .configure_mesh()
            .x_desc(x.label)
            .y_desc(y_label)
            .x_labels(x.ticks)
            .x_label_formatter(&|v| {
                if x.whole {
                    super::words::num(v.round())
                } else {
                    super::words::tick(*v)
                }
            })
            .y_label_formatter(&|y| super::words::tick(*y))
            .draw()
            .map_err(|x| e(x.to_string()))?;
        if warmup > 0 {
            let shade = RGBColor(160, 160, 160).mix(0.3).filled();
            // Within the axis: a recorded warm-up longer than the plotted
            // iterations (a hand-edited or imported database) would map far
            // outside the picture, past what a pixel coordinate holds.
            let end = (warmup as f64 + 0.5).min(x1);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, y0), (end, y1)],
                    shade,
                )))
                .map_err(|x| e(x.to_string()))?
                .label(format!("warm-up ({warmup} excluded)"))
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], shade));
        }
        for l in lines {
            let color = arm_color(l.color);
            if l.repeats.len() > 1 {
                for r in &l.repeats {
                    chart
                        .draw_series(LineSeries::new(finite(r), color.mix(0.3).stroke_width(1)))
                        .map_err(|x| e(x.to_string()))?;
                }
            }
            chart
                .draw_series(LineSeries::new(finite(&l.mean), color.stroke_width(3)))
                .map_err(|x| e(x.to_string()))?
                .label(legend_label(l))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
                });
        }
        draw_legend(&mut chart, &e)?;
        root.present().map_err(|x| e(x.to_string()))?;
    }
    Ok(visible_text(svg))
}

/// One bar per arm at its speedup over the baseline, named under the bar
/// and valued above it, with its 95 % interval as an error bar, a line at
/// 1× and, for the gate's metric, at the gate's minimum.
pub fn speedup_plot(
    title: &str,
    bars: &[Bar],
    min_speedup: Option<f64>,
) -> Result<String, PlotError> {
    let e = err(title);
    let top = bars
        .iter()
        .map(|(_, _, s)| {
            if s.ci_high.is_finite() {
                s.ci_high
            } else {
                s.ratio
            }
        })
        .chain(min_speedup)
        .chain(std::iter::once(1.0))
        .filter(|v| v.is_finite())
        .fold(1.0f64, f64::max)
        // Head room for the values above the bars and the legend.
        * 1.4;
    // At least three slots, so that one bar is not the plot's full width.
    let n = bars.len().max(3) as i32;
    let names: Vec<String> = bars.iter().map(|(a, _, _)| a.clone()).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
        // `a..b` in segments is b - a + 1 bars wide: one per arm.
        let mut chart = chart_builder(&root, title, 70)
            .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..top)
            .map_err(|x| e(x.to_string()))?;
        let label_of = |v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) => usize::try_from(*i)
                .ok()
                .and_then(|i| names.get(i).cloned())
                .unwrap_or_default(),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n as usize)
            .x_label_formatter(&label_of)
            .x_desc("arm")
            .y_desc("speedup vs baseline (×)")
            .draw()
            .map_err(|x| e(x.to_string()))?;
        // The last segment ends at `Last`, not at a value past the range.
        let right_edge = |i: i32| {
            if i + 1 >= n {
                SegmentValue::Last
            } else {
                SegmentValue::Exact(i + 1)
            }
        };
        for (i, (_, color, s)) in bars.iter().enumerate() {
            let i = i as i32;
            let color = arm_color(*color);
            let ratio = if s.ratio.is_finite() { s.ratio } else { 0.0 };
            let mut bar = Rectangle::new(
                [(SegmentValue::Exact(i), 0.0), (right_edge(i), ratio)],
                color.mix(0.8).filled(),
            );
            bar.set_margin(0, 0, 18, 18);
            chart
                .draw_series(std::iter::once(bar))
                .map_err(|x| e(x.to_string()))?;
            let mut value_at = ratio;
            if s.ci_low.is_finite() && s.ci_high.is_finite() {
                value_at = value_at.max(s.ci_high);
                chart
                    .draw_series(std::iter::once(ErrorBar::new_vertical(
                        SegmentValue::CenterOf(i),
                        s.ci_low,
                        ratio,
                        s.ci_high,
                        BLACK.stroke_width(2),
                        14,
                    )))
                    .map_err(|x| e(x.to_string()))?;
            }
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{ratio:.2}×"),
                    (SegmentValue::CenterOf(i), value_at + top * 0.03),
                    ("sans-serif", 15).into_font().color(&BLACK).pos(
                        plotters::style::text_anchor::Pos::new(
                            plotters::style::text_anchor::HPos::Center,
                            plotters::style::text_anchor::VPos::Bottom,
                        ),
                    ),
                )))
                .map_err(|x| e(x.to_string()))?;
        }
        let span = || vec![(SegmentValue::Exact(0), 1.0), (SegmentValue::Last, 1.0)];
        chart
            .draw_series(std::iter::once(PathElement::new(
                span(),
                BLACK.stroke_width(1),
            )))
            .map_err(|x| e(x.to_string()))?
            .label("1× (baseline)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
        // An empty series carries the error bars' legend entry.
        chart
            .draw_series(std::iter::empty::<PathElement<(SegmentValue<i32>, f64)>>())
            .map_err(|x| e(x.to_string()))?
            .label("95 % CI")
            .legend(|(x, y)| {
                PathElement::new(vec![(x + 9, y - 6), (x + 9, y + 6)], BLACK.stroke_width(2))
            });
        if let Some(g) = min_speedup {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(SegmentValue::Exact(0), g), (SegmentValue::Last, g)],
                    RED.stroke_width(2),
                )))
                .map_err(|x| e(x.to_string()))?
                .label(format!("gate {g:.2}×"))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED));
        }
        draw_legend(&mut chart, &e)?;
        root.present().map_err(|x| e(x.to_string()))?;
    }
    Ok(visible_text(svg))
}

/// A cost against batch size on log–log axes, a line per series (points
/// are (batch size, value)), as the records' per-batch tables read.
pub fn batch_plot(title: &str, y_label: &str, lines: &[Line]) -> Result<String, PlotError> {
    let e = err(title);
    let pts = || {
        lines
            .iter()
            .flat_map(|l| finite(&l.mean))
            .filter(|(x, y)| *x > 0.0 && *y > 0.0)
    };
    let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (f64::INFINITY, 0.0f64, f64::INFINITY, 0.0f64);
    for (x, y) in pts() {
        x_lo = x_lo.min(x);
        x_hi = x_hi.max(x);
        y_lo = y_lo.min(y);
        y_hi = y_hi.max(y);
    }
    if !x_lo.is_finite() {
        (x_lo, x_hi, y_lo, y_hi) = (1.0, 10.0, 1.0, 10.0);
    }
    let (x0, x1) = (x_lo / 1.5, x_hi * 1.5);
    let (y0, y1) = (y_lo / 1.5, y_hi * 2.5);
    // Ticks where a reader looks them up: at the batch sizes measured, and
    // at 1-2-5 steps of the value (one decade would show one tick else).
    let mut x_ticks: Vec<f64> = pts().map(|(x, _)| x).collect();
    x_ticks.sort_by(f64::total_cmp);
    x_ticks.dedup();
    let y_ticks = one_two_five(y0, y1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
        let mut chart = chart_builder(&root, title, 78)
            .build_cartesian_2d(
                (x0..x1).log_scale().with_key_points(x_ticks),
                (y0..y1).log_scale().with_key_points(y_ticks),
            )
            .map_err(|x| e(x.to_string()))?;
        chart
            .configure_mesh()
            .x_desc("batch size (log scale)")
            .y_desc(format!("{y_label} (log scale)"))
            .x_label_formatter(&|x| super::words::num(*x))
            .y_label_formatter(&|y| super::words::num(*y))
            .draw()
            .map_err(|x| e(x.to_string()))?;
        for l in lines {
            let color = arm_color(l.color);
            let mut points: Vec<(f64, f64)> = finite(&l.mean)
                .filter(|(x, y)| *x > 0.0 && *y > 0.0)
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(3)))
                .map_err(|x| e(x.to_string()))?
                .label(l.arm.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
                });
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 4, color.filled())),
                )
                .map_err(|x| e(x.to_string()))?;
        }
        draw_legend(&mut chart, &e)?;
        root.present().map_err(|x| e(x.to_string()))?;
    }
    Ok(visible_text(svg))
}

/// A point of a sweep plot: the axis index, the value and its 95 %
/// interval where it has one.
pub type SweepPoint = (usize, f64, Option<(f64, f64)>);

/// One line of a sweep plot: a value at some of the axis' points.
#[derive(Debug, Clone, PartialEq)]
pub struct PointLine {
    pub name: String,
    /// Its colour's index ([`arm_color`]).
    pub color: usize,
    pub points: Vec<SweepPoint>,
}

/// What a sweep plot draws besides its lines: the band of no change (a
/// speedup plot), a reference line (ideal scaling) and the crossovers,
/// each labelled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Guides {
    pub band: Option<(f64, f64)>,
    pub reference: Option<(String, Vec<(usize, f64)>)>,
    /// Points (by index) where an arm starts to pay, with their labels: a
    /// dashed vertical line each.
    pub crossovers: Vec<(usize, String)>,
    /// A ratio (a speedup): drawn on a log axis centred on 1×, so that 2×
    /// faster and 2× slower lie as far from it.
    pub ratio: bool,
}

/// How a sweep's points sit along the x axis: at their numbers on a log
/// scale where every value is a positive number and they span 4× or more
/// (4, 16, 64, 4096 spaced as the numbers are, each tick at a point), in
/// order, evenly spaced, otherwise.
#[derive(Debug, Clone, PartialEq)]
enum PointAxis {
    Log(Vec<f64>),
    InOrder,
}

impl PointAxis {
    fn of(values: &[String]) -> PointAxis {
        let numbers: Option<Vec<f64>> = values
            .iter()
            .map(|v| v.trim().parse::<f64>().ok().filter(|x| x.is_finite()))
            .collect();
        let Some(n) = numbers.filter(|n| n.len() > 1) else {
            return PointAxis::InOrder;
        };
        let (lo, hi) = n
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
                (l.min(*x), h.max(*x))
            });
        if lo > 0.0 && hi / lo >= 4.0 {
            PointAxis::Log(n)
        } else {
            PointAxis::InOrder
        }
    }

    /// The axis' ends for `n` points, with a margin.
    fn extent(&self, n: usize) -> (f64, f64) {
        match self {
            PointAxis::Log(v) => {
                let (l, h) = v
                    .iter()
                    .fold((f64::INFINITY, 0.0f64), |(l, h), x| (l.min(*x), h.max(*x)));
                (l / 1.4, h * 1.4)
            }
            PointAxis::InOrder => (-0.5, n as f64 - 0.5),
        }
    }

    /// Point `i`'s position.
    fn at(&self, i: usize) -> f64 {
        match self {
            PointAxis::Log(n) => n.get(i).copied().unwrap_or(f64::NAN),
            PointAxis::InOrder => i as f64,
        }
    }
}

/// Ticks for a log axis between `lo` and `hi` (both > 0): 1, 2, 5 per
/// decade, and for a narrow range (a speedup near 1×) finer ones, at most
/// about eight.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut ticks = one_two_five(lo, hi);
    if ticks.len() < 4 {
        // Finer ticks, none closer to another than a twelfth of the
        // axis (they would print over each other).
        let gap = (hi / lo).ln() / 12.0;
        for t in [
            1.0, 0.5, 0.67, 0.8, 0.9, 0.95, 1.05, 1.1, 1.25, 1.5, 3.0, 4.0,
        ] {
            if t >= lo && t <= hi && !ticks.iter().any(|x: &f64| (x.ln() - t.ln()).abs() < gap) {
                ticks.push(t);
            }
        }
        ticks.sort_by(f64::total_cmp);
    }
    if ticks.len() > 8 {
        let step = ticks.len().div_ceil(8);
        let one = ticks.iter().position(|t| (t - 1.0).abs() < 1e-9);
        ticks = ticks
            .iter()
            .enumerate()
            .filter(|(i, _)| i % step == 0 || Some(*i) == one)
            .map(|(_, t)| *t)
            .collect();
    }
    ticks
}

/// The y axis of a sweep plot: its ends, and whether it is logarithmic
/// (a ratio, symmetric about 1×, or values spanning more than 10×), with
/// room above the lines for the legend.
fn y_extent(lines: &[PointLine], guides: &Guides) -> (f64, f64, bool) {
    let ys: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter())
        .flat_map(|(_, y, ci)| {
            let (lo, hi) = ci.unwrap_or((*y, *y));
            [*y, lo, hi]
        })
        .chain(guides.band.into_iter().flat_map(|(a, b)| [a, b]))
        .chain(
            guides
                .reference
                .iter()
                .flat_map(|(_, r)| r.iter().map(|(_, y)| *y)),
        )
        .filter(|y| y.is_finite())
        .collect();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for y in &ys {
        lo = lo.min(*y);
        hi = hi.max(*y);
    }
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    let log_y = lo > 0.0 && (guides.ratio || hi / lo > 10.0);
    let (y0, y1) = if log_y {
        let (l, h) = if guides.ratio {
            // Symmetric about 1×, with room above for the legend.
            let m = hi.max(1.0 / lo).max(1.1) * 1.15;
            (1.0 / m, m * m.powf(0.6))
        } else {
            (lo / 1.3, hi * (hi / lo).powf(0.3) * 1.3)
        };
        (l, h)
    } else {
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.02).max(1e-9);
        let y0 = if lo >= 0.0 {
            (lo - pad).max(0.0)
        } else {
            lo - pad
        };
        (y0, hi + pad + (hi - lo + pad) * 0.3)
    };
    (y0, y1, log_y)
}

/// The name of the point at position `v` (its value), or nothing
/// between points.
fn name_at(positions: &[f64], values: &[String], v: f64) -> String {
    positions
        .iter()
        .position(|x| (x - v).abs() <= 1e-9 * x.abs().max(1.0))
        .and_then(|i| values.get(i).cloned())
        .unwrap_or_default()
}

/// The axes' names, each saying where it is on a log scale.
fn axis_names(x_label: &str, y_label: &str, x: &PointAxis, log_y: bool) -> (String, String) {
    let log = |label: &str, on: bool| {
        if on {
            format!("{label} (log scale)")
        } else {
            label.to_string()
        }
    };
    (
        log(x_label, matches!(x, PointAxis::Log(_))),
        log(y_label, log_y),
    )
}

/// Values against a sweep's points (placed as [`PointAxis`] says, named by
/// their values): a line per arm (and series) with interval bars, the
/// no-change band shaded and 1× drawn, the crossovers marked, as `guides`
/// say. A ratio (on an axis symmetric about 1×), or values spanning more
/// than 10×, go on a log axis.
pub fn sweep_plot(
    title: &str,
    x_label: &str,
    x_values: &[String],
    y_label: &str,
    lines: &[PointLine],
    guides: &Guides,
) -> Result<String, PlotError> {
    let e = err(title);
    let (y0, y1, log_y) = y_extent(lines, guides);
    let x_axis = PointAxis::of(x_values);
    let n = x_values.len().max(1);
    let (x0, x1) = x_axis.extent(n);
    let positions: Vec<f64> = (0..x_values.len()).map(|i| x_axis.at(i)).collect();
    let name_of = |v: &f64| name_at(&positions, x_values, *v);
    let (x_desc, y_desc) = axis_names(x_label, y_label, &x_axis, log_y);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
        // One body for the four pairs of axes (plotters types each scale
        // apart); `$mesh` sets the tick count where plotters picks ticks.
        macro_rules! draw {
            ($x:expr, $y:expr, |$m:ident| $mesh:block) => {{
                let mut chart = chart_builder(&root, title, 78)
                    .build_cartesian_2d($x, $y)
                    .map_err(|x| e(x.to_string()))?;
                {
                    let mut mesh = chart.configure_mesh();
                    mesh.disable_x_mesh()
                        .x_desc(x_desc.as_str())
                        .y_desc(y_desc.as_str())
                        .x_label_formatter(&name_of)
                        .y_label_formatter(&|y| super::words::tick(*y));
                    let $m = &mut mesh;
                    $mesh
                    mesh.draw().map_err(|x| e(x.to_string()))?;
                }
                if let Some((a, b)) = guides.band {
                    let shade = RGBColor(160, 160, 160).mix(0.25).filled();
                    chart
                        .draw_series(std::iter::once(Rectangle::new([(x0, a), (x1, b)], shade)))
                        .map_err(|x| e(x.to_string()))?
                        .label(format!("no change ({a:.3}×–{b:.2}×)"))
                        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], shade));
                    chart
                        .draw_series(std::iter::once(PathElement::new(
                            vec![(x0, 1.0), (x1, 1.0)],
                            BLACK.stroke_width(1),
                        )))
                        .map_err(|x| e(x.to_string()))?
                        .label("1× (baseline)")
                        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
                }
                if let Some((label, points)) = &guides.reference {
                    let grey = RGBColor(120, 120, 120);
                    let pts: Vec<(f64, f64)> =
                        points.iter().map(|(i, y)| (x_axis.at(*i), *y)).collect();
                    chart
                        .draw_series(LineSeries::new(pts, grey.stroke_width(2)))
                        .map_err(|x| e(x.to_string()))?
                        .label(label.as_str())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], grey));
                }
                for (i, label) in &guides.crossovers {
                    let x = x_axis.at(*i);
                    let mark = RGBColor(30, 120, 60);
                    // A dashed vertical line: 20 dashes, evenly spaced on
                    // the axis as drawn (geometric on a log axis).
                    let at = |k: usize| {
                        let f = k as f64 / 40.0;
                        if log_y {
                            y0 * (y1 / y0).powf(f)
                        } else {
                            y0 + (y1 - y0) * f
                        }
                    };
                    let dashes = (0..20).map(move |k| {
                        PathElement::new(vec![(x, at(2 * k)), (x, at(2 * k + 1))], mark.stroke_width(2))
                    });
                    chart
                        .draw_series(dashes)
                        .map_err(|x| e(x.to_string()))?
                        .label(label.as_str())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], mark.stroke_width(2))
                        });
                }
                for l in lines {
                    let color = arm_color(l.color);
                    let pts: Vec<(f64, f64)> = l
                        .points
                        .iter()
                        .filter(|(_, y, _)| y.is_finite() && (!log_y || *y > 0.0))
                        .map(|(i, y, _)| (x_axis.at(*i), *y))
                        .collect();
                    chart
                        .draw_series(LineSeries::new(pts.clone(), color.stroke_width(3)))
                        .map_err(|x| e(x.to_string()))?
                        .label(l.name.as_str())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
                        });
                    chart
                        .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))
                        .map_err(|x| e(x.to_string()))?;
                    let bars = l.points.iter().filter_map(|(i, y, ci)| {
                        let (lo, hi) = (*ci)?;
                        let shown = [lo, *y, hi]
                            .iter()
                            .all(|v| v.is_finite() && (!log_y || *v > 0.0));
                        shown.then(|| {
                            ErrorBar::new_vertical(x_axis.at(*i), lo, *y, hi, color.stroke_width(2), 12)
                        })
                    });
                    chart.draw_series(bars).map_err(|x| e(x.to_string()))?;
                }
                draw_legend(&mut chart, &e)?;
            }};
        }
        let y_ticks = log_ticks(y0, y1);
        let x_points = positions.clone();
        match (&x_axis, log_y) {
            (PointAxis::Log(_), true) => draw!(
                (x0..x1).log_scale().with_key_points(x_points),
                (y0..y1).log_scale().with_key_points(y_ticks),
                |_m| {}
            ),
            (PointAxis::Log(_), false) => draw!(
                (x0..x1).log_scale().with_key_points(x_points),
                y0..y1,
                |m| {
                    m.y_labels(10);
                }
            ),
            (_, true) => draw!(x0..x1, (y0..y1).log_scale().with_key_points(y_ticks), |m| {
                m.x_labels(n * 2 + 1);
            }),
            (_, false) => draw!(x0..x1, y0..y1, |m| {
                m.x_labels(n * 2 + 1).y_labels(10);
            }),
        }
        root.present().map_err(|x| e(x.to_string()))?;
    }
    Ok(visible_text(svg))
}

/// 1, 2, 5, 10, 20, … between `lo` and `hi` (both > 0).
fn one_two_five(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return out;
    }
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let v = m * decade;
            if v >= lo && v <= hi {
                out.push(v);
            }
        }
        decade *= 10.0;
    }
    out
}

#[cfg(test)]
mod tests {
    /// Issue 78, point 3: a geometric axis sits on a log scale at its
    /// numbers (4 to 4096 is not five even steps), anything else in order;
    /// a speedup axis is logarithmic and symmetric about 1×, which is a
    /// tick; the crossover is drawn and named.
    #[test]
    fn a_sweep_plot_shows_a_crossover_on_log_axes() {
        let values: Vec<String> = ["4", "16", "64", "256", "4096"].map(String::from).to_vec();
        assert_eq!(
            PointAxis::of(&values),
            PointAxis::Log(vec![4.0, 16.0, 64.0, 256.0, 4096.0])
        );
        let names: Vec<String> = ["a", "b"].map(String::from).to_vec();
        assert_eq!(PointAxis::of(&names), PointAxis::InOrder);
        let close: Vec<String> = ["10", "20"].map(String::from).to_vec();
        assert_eq!(PointAxis::of(&close), PointAxis::InOrder);
        assert!(log_ticks(0.8, 1.25).contains(&1.0));
        assert!(log_ticks(0.2, 5.0).contains(&1.0));
        let line = PointLine {
            name: "fast".into(),
            color: 0,
            points: vec![
                (0, 0.46, Some((0.4, 0.5))),
                (1, 0.8, None),
                (2, 1.0, None),
                (3, 2.1, None),
                (4, 4.4, Some((4.0, 4.8))),
            ],
        };
        let guides = Guides {
            band: Some((0.952, 1.05)),
            crossovers: vec![(3, "crossover: fast pays from n 256".into())],
            ratio: true,
            ..Guides::default()
        };
        let svg = sweep_plot("t", "n", &values, "speedup (×)", &[line], &guides).unwrap();
        // The texts the SVG draws, each element's content trimmed.
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| {
                t.split_once('>')
                    .and_then(|(_, rest)| rest.split_once("</text>"))
            })
            .map(|(text, _)| text.trim())
            .collect();
        for text in [
            "crossover: fast pays from n 256",
            "speedup (×) (log scale)",
            "n (log scale)",
            "1.00",
            "4096",
            "1× (baseline)",
        ] {
            assert!(texts.contains(&text), "{text} missing: {texts:?}");
        }
    }

    use super::*;

    /// The texts of an SVG as plotters writes them (`<text …>\nTEXT\n</text>`).
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                let body = &t[t.find('>')? + 1..t.find("</text>")?];
                Some(body.trim().to_string())
            })
            .collect()
    }

    fn line(arm: &str, color: usize, repeats: &[&[f64]]) -> Line {
        let pts = |r: &[f64]| -> Vec<(f64, f64)> {
            r.iter()
                .enumerate()
                .map(|(i, v)| ((i + 1) as f64, *v))
                .collect()
        };
        let n = repeats.iter().map(|r| r.len()).max().unwrap_or(0);
        let mean = (0..n)
            .map(|i| {
                let v: Vec<f64> = repeats.iter().filter_map(|r| r.get(i).copied()).collect();
                ((i + 1) as f64, v.iter().sum::<f64>() / v.len() as f64)
            })
            .collect();
        Line {
            arm: arm.into(),
            color,
            mean,
            repeats: repeats.iter().map(|r| pts(r)).collect(),
        }
    }

    #[test]
    fn iteration_plot_has_lines_legend_and_warmup_shade() {
        let lines = vec![
            line("recursive", 0, &[&[3.0, 2.0, 2.1, 2.05]]),
            line(
                "interleaved",
                1,
                &[&[1.5, 0.7, 0.72, 0.69], &[1.4, 0.8, 0.7, 0.7]],
            ),
        ];
        let svg = iteration_plot("time/iteration_seconds", "seconds (s)", 1, &lines).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        let t = texts(&svg);
        assert!(t.iter().any(|t| t == "recursive"), "{t:?}");
        assert!(
            t.iter()
                .any(|t| t == "interleaved (mean of 2 repeats; faint: each)"),
            "{t:?}"
        );
        assert!(svg.contains("warm-up (1 excluded)"));
        assert!(svg.contains("<polyline"), "lines drawn");
        // The same colour for the same arm index, whatever the plot.
        assert!(
            svg.contains("#D55E00") || svg.contains("#d55e00"),
            "vermillion for arm 1"
        );
        let no_warmup = iteration_plot("t", "s", 0, &lines).unwrap();
        assert!(!no_warmup.contains("warm-up"));
        // A warm-up far beyond the plotted iterations (an edited or
        // imported database) shades the whole axis, and never overflows a
        // pixel coordinate (found by import_fuzz).
        let huge = iteration_plot("t", "s", i64::MAX / 2, &lines).unwrap();
        assert!(huge.contains("excluded)"), "{huge}");
    }

    #[test]
    fn speedup_plot_names_bars_and_labels_the_interval() {
        let s = Speedup {
            ratio: 3.2,
            se: 0.1,
            ci_low: 3.0,
            ci_high: 3.4,
            log_se: 0.03,
            df: 4.0,
        };
        let svg = speedup_plot("speedup", &[("interleaved".into(), 1, s)], Some(1.5)).unwrap();
        let t = texts(&svg);
        assert!(
            t.iter().any(|t| t == "interleaved"),
            "the bar's tick label: {t:?}"
        );
        assert!(svg.contains("3.20×"));
        assert!(svg.contains("gate 1.50×"));
        assert!(svg.contains("95 % CI"));
        assert!(svg.contains("<rect"));
        // Empty input still draws an (empty) chart rather than failing.
        assert!(speedup_plot("none", &[], None).unwrap().contains("<svg"));
    }

    #[test]
    fn a_negative_series_keeps_its_range() {
        let l = line("a", 0, &[&[-5.0, -4.0, -6.0]]);
        let (lo, hi) = y_range(&[l]);
        assert!(lo < -6.0 && hi > -4.0, "{lo}..{hi}");
        let p = line("b", 0, &[&[2.0, 3.0]]);
        // 2..3: padded by 8 % of the spread, not dragged down to 0.
        assert!((y_range(&[p]).0 - 1.92).abs() < 1e-9);
    }

    #[test]
    fn log_ticks_step_one_two_five() {
        assert_eq!(one_two_five(11.0, 190.0), [20.0, 50.0, 100.0]);
        assert_eq!(one_two_five(0.9, 12.0), [1.0, 2.0, 5.0, 10.0]);
        assert!(one_two_five(0.0, 1.0).is_empty());
    }

    #[test]
    fn batch_plot_is_log_log() {
        let l = Line {
            arm: "lcx kernel".into(),
            color: 0,
            mean: vec![(1.0, 20.0), (16.0, 3.0), (256.0, 0.9), (4.0, 7.0)],
            repeats: Vec::new(),
        };
        let svg = batch_plot("µs/state by batch size", "µs", &[l]).unwrap();
        assert!(svg.contains("batch size (log scale)"));
        assert!(svg.contains("µs (log scale)"));
        assert!(svg.contains("<circle"), "points marked");
    }
}
