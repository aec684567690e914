//! The plots, drawn by `plotters` into SVG and wrapped in a `<figure>` that names the plot and
//! how many data values it draws (`data-plot`, `data-points`: what the browser test checks).
//! Data are drawn in colour, axes and grid in black and grey, so drawn data can be told apart.

use plotters::prelude::*;

use crate::page::escape;
use crate::HtmlError;

/// Colours for data (tab10 without its grey).
const COLOURS: [RGBColor; 9] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The `i`th data colour.
pub fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

const SIZE: (u32, u32) = (600, 320);
const FONT: (&str, u32) = ("sans-serif", 13);
const CAPTION: (&str, u32) = ("sans-serif", 16);
/// How far a plot with a legend extends its y axis above the data, so the legend hides none.
const LEGEND_ROOM: f64 = 1.35;

/// A named line.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y), in x order.
    pub points: Vec<(f64, f64)>,
}

/// One bar, with an optional interval drawn as a whisker.
pub struct Bar {
    /// Category.
    pub label: String,
    /// Height.
    pub value: f64,
    /// (low, high).
    pub interval: Option<(f64, f64)>,
}

fn error(plot: &str) -> impl Fn(String) -> HtmlError + '_ {
    move |reason| HtmlError::Plot { plot: plot.to_string(), reason }
}

/// Draws with `draw` into an SVG and wraps it.
fn figure(
    id: &str,
    points: usize,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<(), String>,
) -> Result<String, HtmlError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| error(id)(e.to_string()))?;
        draw(&root).map_err(error(id))?;
        root.present().map_err(|e| error(id)(e.to_string()))?;
    }
    // Inline SVG in HTML5 needs no namespace declaration, and the page names no URL.
    let svg = svg
        .replace(" xmlns=\"http://www.w3.org/2000/svg\"", "")
        .replace(" xmlns:xlink=\"http://www.w3.org/1999/xlink\"", "");
    Ok(format!("<figure class=\"plot\" data-plot=\"{}\" data-points=\"{points}\">\n{svg}\n</figure>\n", escape(id)))
}

/// A chart with a caption, margins, and label areas (`y_area` pixels for the y labels).
fn chart_builder<'a, 'b, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    y_area: u32,
) -> ChartBuilder<'a, 'b, DB> {
    let mut builder = ChartBuilder::on(root);
    builder.caption(title, CAPTION).margin(10).x_label_area_size(40).y_label_area_size(y_area);
    builder
}

/// The series' names in a box at the upper right.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(FONT)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

/// (min, max) of `values`, widened so a constant series still spans a range.
fn span(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) =
        values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    if hi - lo < 1e-12 {
        hi = lo + lo.abs().max(1.0);
    }
    (lo, hi + (hi - lo) * 0.05)
}

/// Lines over x (time, or a latency on a log scale).
pub fn lines(
    id: &str,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    log_x: bool,
) -> Result<String, HtmlError> {
    let points: usize = series.iter().map(|s| s.points.len()).sum();
    let (x0, x1) = span(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)), !log_x);
    let (_, y1) = span(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)), true);
    let y1 = y1 * LEGEND_ROOM;
    figure(id, points, SIZE, |root| {
        let e = |e: &dyn std::fmt::Display| e.to_string();
        let mut builder = chart_builder(root, title, 60);
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_desc(x_desc)
                    .y_desc(y_desc)
                    .label_style(FONT)
                    .light_line_style(WHITE)
                    .draw()
                    .map_err(|x| e(&x))?;
                for (i, s) in series.iter().enumerate() {
                    let c = colour(i);
                    chart
                        .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                        .map_err(|x| e(&x))?
                        .label(s.name.as_str())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
                    chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 2, c.filled()))).map_err(|x| e(&x))?;
                }
                draw_legend(&mut chart)?;
            }};
        }
        if log_x {
            draw!(builder.build_cartesian_2d((x0.max(1e-3)..x1).log_scale(), 0f64..y1).map_err(|x| e(&x))?);
        } else {
            draw!(builder.build_cartesian_2d(x0..x1, 0f64..y1).map_err(|x| e(&x))?);
        }
        Ok(())
    })
}

/// Category `i` of `n` sits at `i`; the axis spans half a category either side.
fn categories(n: usize) -> std::ops::Range<f64> {
    -0.5..n.max(1) as f64 - 0.5
}

/// The label of the category at `x`; blank for a tick between categories.
fn category_label(labels: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    labels.get(i as usize).cloned().unwrap_or_default()
}

/// Horizontal bars, one per category, with whiskers where an interval is given.
pub fn hbars(id: &str, title: &str, x_desc: &str, bars: &[Bar]) -> Result<String, HtmlError> {
    let n = bars.len();
    let (_, x1) = span(bars.iter().map(|b| b.interval.map_or(b.value, |i| i.1.max(b.value))), true);
    let height = 80 + 26 * n.max(1) as u32;
    let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    figure(id, n, (SIZE.0, height), |root| {
        let e = |e: &dyn std::fmt::Display| e.to_string();
        let mut chart =
            chart_builder(root, title, 200).build_cartesian_2d(0f64..x1, categories(n)).map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_labels(n.max(1))
            .y_label_formatter(&|y| category_label(&labels, *y))
            .label_style(FONT)
            .light_line_style(WHITE)
            .disable_y_mesh()
            .draw()
            .map_err(|x| e(&x))?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let y = i as f64;
                Rectangle::new([(0.0, y - 0.35), (b.value, y + 0.35)], colour(0).filled())
            }))
            .map_err(|x| e(&x))?;
        chart
            .draw_series(bars.iter().enumerate().filter_map(|(i, b)| {
                let (lo, hi) = b.interval?;
                Some(ErrorBar::new_horizontal(i as f64, lo, b.value, hi, colour(3).stroke_width(2), 10))
            }))
            .map_err(|x| e(&x))?;
        Ok(())
    })
}

/// Vertical bars, one per category (a histogram over labelled buckets).
pub fn vbars(id: &str, title: &str, x_desc: &str, y_desc: &str, bars: &[Bar]) -> Result<String, HtmlError> {
    let groups: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    let series = [(String::new(), bars.iter().map(|b| Some(b.value)).collect::<Vec<_>>())];
    grouped_inner(id, title, x_desc, y_desc, &groups, &series, false)
}

/// Bars grouped by category, one colour per series (with a legend); `None` leaves a gap.
pub fn grouped(
    id: &str,
    title: &str,
    y_desc: &str,
    groups: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> Result<String, HtmlError> {
    grouped_inner(id, title, "", y_desc, groups, series, true)
}

fn grouped_inner(
    id: &str,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    groups: &[String],
    series: &[(String, Vec<Option<f64>>)],
    legend: bool,
) -> Result<String, HtmlError> {
    let points = series.iter().flat_map(|(_, v)| v.iter().flatten()).count();
    let (_, y1) = span(series.iter().flat_map(|(_, v)| v.iter().flatten().copied()), true);
    // Room above the bars for the legend.
    let y1 = if legend { y1 * LEGEND_ROOM } else { y1 };
    let n = groups.len().max(1);
    let width = (SIZE.0).max(120 + 70 * n as u32);
    figure(id, points, (width, SIZE.1), |root| {
        let e = |e: &dyn std::fmt::Display| e.to_string();
        let mut chart =
            chart_builder(root, title, 60).build_cartesian_2d(categories(n), 0f64..y1).map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_labels(n)
            .x_label_formatter(&|x| category_label(groups, *x))
            .label_style(FONT)
            .light_line_style(WHITE)
            .disable_x_mesh()
            .draw()
            .map_err(|x| e(&x))?;
        // The series share 80% of a category's width, side by side.
        let w = 0.8 / series.len().max(1) as f64;
        for (j, (name, values)) in series.iter().enumerate() {
            let c = colour(j);
            let drawn = chart
                .draw_series(values.iter().enumerate().filter_map(|(i, v)| {
                    let x = i as f64 - 0.4 + j as f64 * w;
                    Some(Rectangle::new([(x, 0.0), (x + w * 0.95, (*v)?)], c.filled()))
                }))
                .map_err(|x| e(&x))?;
            if legend {
                drawn
                    .label(name.as_str())
                    .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
            }
        }
        if legend {
            draw_legend(&mut chart)?;
        }
        Ok(())
    })
}

/// One dot per repetition and a dashed line at the median: a distribution, not only its middle.
pub fn dots(id: &str, title: &str, y_desc: &str, values: &[f64]) -> Result<String, HtmlError> {
    let (_, y1) = span(values.iter().copied(), true);
    let n = values.len();
    let median = nesquic_record::stats::median(values);
    figure(id, n, (360, SIZE.1), |root| {
        let e = |e: &dyn std::fmt::Display| e.to_string();
        let mut chart =
            chart_builder(root, title, 60).build_cartesian_2d(0.5f64..n as f64 + 0.5, 0f64..y1).map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc("repetition")
            .y_desc(y_desc)
            .x_labels(n.clamp(1, 10))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .label_style(FONT)
            .light_line_style(WHITE)
            .draw()
            .map_err(|x| e(&x))?;
        if let Some(m) = median {
            chart
                .draw_series(DashedLineSeries::new([(0.5, m), (n as f64 + 0.5, m)], 6, 4, colour(3).stroke_width(1)))
                .map_err(|x| e(&x))?;
        }
        chart
            .draw_series(
                values.iter().enumerate().map(|(i, &v)| Circle::new((i as f64 + 1.0, v), 5, colour(0).filled())),
            )
            .map_err(|x| e(&x))?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_name_no_url_and_count_their_data() {
        let s = Series { name: "a".into(), points: vec![(0.0, 1.0), (1.0, 2.0), (2.0, 1.5)] };
        let html = lines("t", "title", "x", "y", &[s], false).expect("drawn");
        assert!(!html.contains("http://") && !html.contains("https://"), "{html}");
        assert!(html.contains("data-points=\"3\""), "{html}");
        let bars = [Bar { label: "crypto".into(), value: 0.3, interval: Some((0.2, 0.4)) }];
        let html = hbars("b", "title", "share", &bars).expect("drawn");
        assert!(html.contains("<rect") && html.contains("data-points=\"1\""), "{html}");
        assert!(dots("d", "t", "y", &[1.0, 2.0, 3.0]).expect("drawn").contains("<circle"));
        let g =
            grouped("g", "t", "y", &["a".into(), "b".into()], &[("s".into(), vec![Some(1.0), None])]).expect("drawn");
        assert!(g.contains("data-points=\"1\""), "{g}");
    }
}
