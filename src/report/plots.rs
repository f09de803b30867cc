//! SVG plots for archived reports: per-iteration time per arm (warm-up
//! shaded) and speedup bars with 95% intervals. Pure: data in, SVG text
//! out, through plotters' SVG backend only (no fonts or bitmaps needed).

use plotters::prelude::*;

use super::stats::Speedup;

/// A plot could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("drawing plot `{title}`: {message}")]
pub struct PlotError {
    pub title: String,
    pub message: String,
}

const WIDTH: u32 = 820;
const HEIGHT: u32 = 460;

fn err(title: &str) -> impl Fn(String) -> PlotError + '_ {
    move |message| PlotError {
        title: title.to_string(),
        message,
    }
}

/// Per-iteration values of one metric, one line per arm; iterations
/// `1..=warmup` shaded grey. `series`: (arm, [(iteration, value)]).
pub fn iteration_plot(
    title: &str,
    y_label: &str,
    warmup: i64,
    series: &[(String, Vec<(i64, f64)>)],
) -> Result<String, PlotError> {
    let e = err(title);
    let points = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x_max, mut y_min, mut y_max) = (1i64, f64::INFINITY, f64::NEG_INFINITY);
    for &(x, y) in points {
        if y.is_finite() {
            x_max = x_max.max(x);
            y_min = y_min.min(y);
            y_max = y_max.max(y);
        }
    }
    if !y_min.is_finite() {
        (y_min, y_max) = (0.0, 1.0);
    }
    let pad = ((y_max - y_min) * 0.08).max(y_max.abs() * 0.02).max(1e-9);
    let (y0, y1) = ((y_min - pad).max(0.0), y_max + pad);
    let (x0, x1) = (0.5, x_max as f64 + 0.5);

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|x| e(x.to_string()))?;
        chart
            .configure_mesh()
            .x_desc("iteration")
            .y_desc(y_label)
            .x_labels((x_max as usize).clamp(2, 20))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(|x| e(x.to_string()))?;
        if warmup > 0 {
            let shade = RGBColor(160, 160, 160).mix(0.3).filled();
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, y0), (warmup as f64 + 0.5, y1)],
                    shade,
                )))
                .map_err(|x| e(x.to_string()))?
                .label(format!("warm-up ({warmup} excluded)"))
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], shade));
        }
        for (i, (arm, pts)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    pts.iter()
                        .filter(|(_, y)| y.is_finite())
                        .map(|&(x, y)| (x as f64, y)),
                    color.stroke_width(2),
                ))
                .map_err(|x| e(x.to_string()))?
                .label(arm.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|x| e(x.to_string()))?;
        root.present().map_err(|x| e(x.to_string()))?;
    }
    Ok(svg)
}

/// One bar per arm at its speedup over the baseline, with the 95% interval
/// as an error bar, a line at 1× and, when given, at the gate's minimum.
pub fn speedup_plot(
    title: &str,
    bars: &[(String, Speedup)],
    min_speedup: Option<f64>,
) -> Result<String, PlotError> {
    let e = err(title);
    let top = bars
        .iter()
        .map(|(_, s)| {
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
        * 1.15;
    let n = bars.len().max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..n, 0.0..top)
            .map_err(|x| e(x.to_string()))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("speedup vs baseline (×)")
            .draw()
            .map_err(|x| e(x.to_string()))?;
        for (i, (arm, s)) in bars.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let x = i as f64;
            let ratio = if s.ratio.is_finite() { s.ratio } else { 0.0 };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x + 0.2, 0.0), (x + 0.8, ratio)],
                    color.mix(0.7).filled(),
                )))
                .map_err(|x| e(x.to_string()))?;
            if s.ci_low.is_finite() && s.ci_high.is_finite() {
                let c = x + 0.5;
                let whisker = vec![
                    PathElement::new(vec![(c, s.ci_low), (c, s.ci_high)], BLACK.stroke_width(2)),
                    PathElement::new(vec![(c - 0.08, s.ci_low), (c + 0.08, s.ci_low)], BLACK),
                    PathElement::new(vec![(c - 0.08, s.ci_high), (c + 0.08, s.ci_high)], BLACK),
                ];
                chart.draw_series(whisker).map_err(|x| e(x.to_string()))?;
            }
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{arm} {ratio:.2}×"),
                    (x + 0.22, top * 0.97),
                    ("sans-serif", 14).into_font(),
                )))
                .map_err(|x| e(x.to_string()))?;
        }
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, 1.0), (n, 1.0)],
                BLACK.stroke_width(1),
            )))
            .map_err(|x| e(x.to_string()))?
            .label("1× (baseline)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
        if let Some(g) = min_speedup {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(0.0, g), (n, g)],
                    RED.stroke_width(2),
                )))
                .map_err(|x| e(x.to_string()))?
                .label(format!("gate {g:.2}×"))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|x| e(x.to_string()))?;
        root.present().map_err(|x| e(x.to_string()))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iteration_plot_has_lines_legend_and_warmup_shade() {
        let series = vec![
            (
                "recursive".to_string(),
                vec![(1, 3.0), (2, 2.0), (3, 2.1), (4, 2.05)],
            ),
            (
                "interleaved".to_string(),
                vec![(1, 1.5), (2, 0.7), (3, 0.72), (4, 0.69)],
            ),
        ];
        let svg = iteration_plot("time/iteration_seconds", "seconds", 1, &series).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.contains("recursive") && svg.contains("interleaved"));
        assert!(svg.contains("warm-up (1 excluded)"));
        assert!(svg.contains("<polyline"), "lines drawn");
        let no_warmup = iteration_plot("t", "s", 0, &series).unwrap();
        assert!(!no_warmup.contains("warm-up"));
    }

    #[test]
    fn speedup_plot_has_bars_and_gate_line() {
        let s = Speedup {
            ratio: 3.2,
            se: 0.1,
            ci_low: 3.0,
            ci_high: 3.4,
        };
        let svg = speedup_plot("speedup", &[("interleaved".into(), s)], Some(1.5)).unwrap();
        assert!(svg.contains("interleaved 3.20×"));
        assert!(svg.contains("gate 1.50×"));
        assert!(svg.contains("<rect"));
        // Empty input still draws an (empty) chart rather than failing.
        assert!(speedup_plot("none", &[], None).unwrap().contains("<svg"));
    }
}
