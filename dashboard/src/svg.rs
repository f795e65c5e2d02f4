//! Charts as SVG shapes computed here and drawn by the templates (which
//! escape every label): a run's timeline per device, a case's durations.

use super::view::{AttemptView, CaseAttemptView, RunDetail, duration};

pub const WIDTH: f64 = 1000.0;
const LANE: f64 = 26.0;
const LABELS: f64 = 250.0;

/// One attempt on a device's lane.
#[derive(Debug, Clone)]
pub struct Bar {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    /// A CSS class: the attempt's result.
    pub result: String,
    pub title: String,
    /// Where the bar leads: its attempt on the page.
    pub href: String,
}

#[derive(Debug, Clone)]
pub struct Timeline {
    pub height: f64,
    pub lanes: Vec<(f64, String)>,
    pub bars: Vec<Bar>,
    /// Tick marks: x and label, at round times.
    pub ticks: Vec<(f64, String)>,
    /// Every colour the bars use, in a fixed order, for the legend.
    pub legend: Vec<&'static str>,
}

/// The results a bar can show, in the legend's order.
const RESULTS: [&str; 6] = ["passed", "failed", "unsupported", "infrastructure", "running", "pending"];

/// Round tick times from 0 to `span_ms`: a step of 1, 2 or 5 times a power
/// of ten (or whole seconds, minutes) so that at most six ticks fit.
pub fn round_ticks(span_ms: i64) -> Vec<i64> {
    const STEPS: [i64; 20] = [
        1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
        600_000, 1_800_000,
    ];
    let span = span_ms.max(1);
    let step = STEPS.iter().copied().find(|step| span / step <= 5).unwrap_or(3_600_000 * (span / 3_600_000 / 5 + 1));
    (0..).map(|i| i * step).take_while(|t| *t <= span).collect()
}

impl Timeline {
    pub fn new(detail: &RunDetail, now_ms: i64) -> Self {
        let lanes = detail.lanes();
        let start = detail.run.started_ms;
        let end = lanes
            .values()
            .flatten()
            .map(|(_, a)| a.finished_ms.unwrap_or(now_ms))
            .max()
            .unwrap_or(start + 1)
            .max(start + 1);
        let span = (end - start) as f64;
        let scale = |ms: i64| LABELS + (ms - start).max(0) as f64 / span * (WIDTH - LABELS - 10.0);
        let mut bars = Vec::new();
        let mut names = Vec::new();
        for (index, (device, attempts)) in lanes.iter().enumerate() {
            let y = 20.0 + index as f64 * LANE;
            // A lane is named by its device, its platform and its model.
            let platform = attempts.iter().find_map(|(_, a)| a.platform.as_deref());
            let label = [Some(device.as_str()), platform, detail.models.get(device).map(String::as_str)]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" · ");
            names.push((y + 15.0, label));
            for (case, attempt) in attempts {
                bars.push(bar(case, attempt, y, &scale, now_ms));
            }
        }
        let tick = |ms: i64| if ms == 0 { "0".to_owned() } else { duration(ms) };
        let ticks = round_ticks(end - start).into_iter().map(|ms| (scale(start + ms), tick(ms))).collect();
        let legend = RESULTS.into_iter().filter(|r| bars.iter().any(|b| b.result == *r)).collect();
        Self { height: 30.0 + lanes.len() as f64 * LANE, lanes: names, bars, ticks, legend }
    }
}

fn bar(case: &str, attempt: &AttemptView, y: f64, scale: &impl Fn(i64) -> f64, now_ms: i64) -> Bar {
    let from = attempt.started_ms.unwrap_or(now_ms);
    let to = attempt.finished_ms.unwrap_or(now_ms);
    let x = scale(from);
    let took = attempt.ms.map(duration).unwrap_or_else(|| duration(to - from));
    Bar {
        x,
        y: y + 3.0,
        width: (scale(to) - x).max(2.0),
        result: attempt.result.clone(),
        href: format!("#{}", attempt.anchor),
        title: format!(
            "{case} #{} on {}: {} ({took})",
            attempt.attempt,
            attempt.device.as_deref().unwrap_or("?"),
            attempt.result
        ),
    }
}

/// A case's attempts over runs, oldest left: one line per series with a dot
/// per attempt, on axes (values up the left, the runs' dates along the
/// bottom). The durations chart and the app-health charts of a case page.
#[derive(Debug, Clone)]
pub struct Trend {
    pub lines: Vec<TrendLine>,
    /// Value axis: y and label (0, half, the largest).
    pub y_ticks: Vec<(f64, String)>,
    /// Time axis: x and the run's date, for the oldest, middle and newest attempt.
    pub x_ticks: Vec<(f64, String)>,
}

#[derive(Debug, Clone)]
pub struct TrendLine {
    /// A CSS class: the series.
    pub class: &'static str,
    pub label: &'static str,
    pub points: String,
    /// x, y, a CSS class (the attempt's result, or the series) and a title.
    pub dots: Vec<(f64, f64, String, String)>,
}

/// One series of a trend: its class, its label, its value of an attempt.
pub struct Series {
    pub class: &'static str,
    pub label: &'static str,
    pub value: fn(&CaseAttemptView) -> Option<f64>,
}

fn mb(kb: i64) -> f64 {
    kb as f64 / 1024.0
}

pub const TREND_HEIGHT: f64 = 180.0;
/// Left of the plot: the value labels.
const TREND_LEFT: f64 = 70.0;
/// Below the plot: the date labels.
const TREND_BOTTOM: f64 = 30.0;

impl Trend {
    /// How long each attempt took, its dot coloured by its result.
    pub fn new(attempts: &[CaseAttemptView]) -> Self {
        let durations = Series { class: "trend", label: "duration", value: |a| a.ms.map(|ms| ms as f64) };
        Self::of(attempts, &[durations], |ms| duration(ms.round() as i64), true).unwrap_or(Self {
            lines: Vec::new(),
            y_ticks: Vec::new(),
            x_ticks: Vec::new(),
        })
    }

    /// The app's heap before and after each attempt that reported it.
    pub fn memory(attempts: &[CaseAttemptView]) -> Option<Self> {
        let series = [
            Series {
                class: "heap-start",
                label: "heap before",
                value: |a| a.health.and_then(|h| h.heap_start_kb).map(mb),
            },
            Series { class: "heap-end", label: "heap after", value: |a| a.health.and_then(|h| h.heap_end_kb).map(mb) },
        ];
        Self::of(attempts, &series, |mb| format!("{mb:.0} MB"), false)
    }

    /// React's render time over each attempt that profiled.
    pub fn render(attempts: &[CaseAttemptView]) -> Option<Self> {
        let render = Series {
            class: "render",
            label: "render time",
            value: |a| a.health.and_then(|h| h.render_us).map(|us| us as f64 / 1000.0),
        };
        Self::of(attempts, &[render], |ms| format!("{ms:.0} ms"), false)
    }

    /// `None` when no attempt has a value of any series. `by_result` colours
    /// each dot by its attempt's result rather than by its series.
    fn of(attempts: &[CaseAttemptView], series: &[Series], label: fn(f64) -> String, by_result: bool) -> Option<Self> {
        let shown: Vec<&CaseAttemptView> =
            attempts.iter().rev().filter(|a| series.iter().any(|s| (s.value)(a).is_some())).collect();
        if shown.is_empty() {
            return None;
        }
        let values = shown.iter().flat_map(|a| series.iter().filter_map(|s| (s.value)(a)));
        let max = values.fold(0.0, f64::max);
        let max = if max > 0.0 { max } else { 1.0 };
        let (top, bottom) = (12.0, TREND_HEIGHT - TREND_BOTTOM);
        let y_of = |value: f64| bottom - value / max * (bottom - top);
        let step = if shown.len() > 1 { (WIDTH - TREND_LEFT - 30.0) / (shown.len() - 1) as f64 } else { 0.0 };
        let x_of = |index: usize| TREND_LEFT + 10.0 + index as f64 * step;
        let lines = series
            .iter()
            .map(|s| {
                let mut points = Vec::new();
                let mut dots = Vec::new();
                for (index, attempt) in shown.iter().enumerate() {
                    let Some(value) = (s.value)(attempt) else { continue };
                    let (x, y) = (x_of(index), y_of(value));
                    points.push(format!("{x:.1},{y:.1}"));
                    let title = format!(
                        "{} #{}: {} ({} {}) {}",
                        attempt.run_id,
                        attempt.attempt,
                        attempt.result,
                        s.label,
                        label(value),
                        attempt.run_started
                    );
                    let class = if by_result { attempt.result.clone() } else { s.class.to_owned() };
                    dots.push((x, y, class, title));
                }
                TrendLine { class: s.class, label: s.label, points: points.join(" "), dots }
            })
            .collect();
        let y_ticks = [0.0, max / 2.0, max].iter().map(|v| (y_of(*v), label(*v))).collect();
        let mut marked: Vec<usize> = vec![0, shown.len() / 2, shown.len() - 1];
        marked.dedup();
        let x_ticks = marked
            .into_iter()
            .map(|i| (x_of(i), shown[i].run_started.get(..16).unwrap_or(&shown[i].run_started).to_owned()))
            .collect();
        Some(Self { lines, y_ticks, x_ticks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_fall_on_round_times() {
        assert_eq!(round_ticks(9_600), [0, 2_000, 4_000, 6_000, 8_000]);
        assert_eq!(round_ticks(2_130), [0, 500, 1_000, 1_500, 2_000]);
        assert_eq!(round_ticks(184_000), [0, 60_000, 120_000, 180_000]);
        assert_eq!(round_ticks(0), [0, 1]);
        assert!(round_ticks(50 * 3_600_000).len() <= 6);
        for span in [1, 7, 999, 12_345, 3_600_000, 7_654_321] {
            let ticks = round_ticks(span);
            assert!((2..=6).contains(&ticks.len()) || span < 2, "{span}: {ticks:?}");
        }
    }
}
