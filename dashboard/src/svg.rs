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

/// A case's durations, oldest left, as a line with a dot per attempt, on
/// axes: durations up the left, the runs' dates along the bottom.
#[derive(Debug, Clone)]
pub struct Trend {
    pub points: String,
    pub dots: Vec<(f64, f64, String, String)>,
    /// Value axis: y and label (0, half, the longest).
    pub y_ticks: Vec<(f64, String)>,
    /// Time axis: x and the run's date, for the oldest, middle and newest dot.
    pub x_ticks: Vec<(f64, String)>,
}

pub const TREND_HEIGHT: f64 = 180.0;
/// Left of the plot: the value labels.
const TREND_LEFT: f64 = 70.0;
/// Below the plot: the date labels.
const TREND_BOTTOM: f64 = 30.0;

impl Trend {
    pub fn new(attempts: &[CaseAttemptView]) -> Self {
        let timed: Vec<&CaseAttemptView> = attempts.iter().rev().filter(|a| a.ms.is_some()).collect();
        let max = timed.iter().filter_map(|a| a.ms).max().unwrap_or(1).max(1);
        let (top, bottom) = (12.0, TREND_HEIGHT - TREND_BOTTOM);
        let y_of = |ms: i64| bottom - ms as f64 / max as f64 * (bottom - top);
        let step = if timed.len() > 1 { (WIDTH - TREND_LEFT - 30.0) / (timed.len() - 1) as f64 } else { 0.0 };
        let x_of = |index: usize| TREND_LEFT + 10.0 + index as f64 * step;
        let mut points = Vec::new();
        let mut dots = Vec::new();
        for (index, attempt) in timed.iter().enumerate() {
            let ms = attempt.ms.unwrap_or_default();
            let (x, y) = (x_of(index), y_of(ms));
            points.push(format!("{x:.1},{y:.1}"));
            let title = format!(
                "{} #{}: {} ({}) {}",
                attempt.run_id,
                attempt.attempt,
                attempt.result,
                duration(ms),
                attempt.run_started
            );
            dots.push((x, y, attempt.result.clone(), title));
        }
        let y_ticks = [0, max / 2, max].iter().map(|ms| (y_of(*ms), duration(*ms))).collect();
        let mut shown: Vec<usize> = vec![0, timed.len() / 2, timed.len().saturating_sub(1)];
        shown.dedup();
        let x_ticks = shown
            .into_iter()
            .filter_map(|i| {
                timed.get(i).map(|a| (x_of(i), a.run_started.get(..16).unwrap_or(&a.run_started).to_owned()))
            })
            .collect();
        Self { points: points.join(" "), dots, y_ticks, x_ticks }
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
