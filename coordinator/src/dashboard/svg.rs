//! Charts as SVG shapes computed here and drawn by the templates (which
//! escape every label): a run's timeline per device, a case's durations.

use super::view::{AttemptView, CaseAttemptView, RunDetail, duration};

pub const WIDTH: f64 = 1000.0;
const LANE: f64 = 26.0;
const LABELS: f64 = 170.0;

/// One attempt on a device's lane.
#[derive(Debug, Clone)]
pub struct Bar {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    /// A CSS class: the attempt's result.
    pub result: String,
    pub title: String,
}

#[derive(Debug, Clone)]
pub struct Timeline {
    pub height: f64,
    pub lanes: Vec<(f64, String)>,
    pub bars: Vec<Bar>,
    /// Tick marks: x and label.
    pub ticks: Vec<(f64, String)>,
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
            names.push((y + 15.0, device.clone()));
            for (case, attempt) in attempts {
                bars.push(bar(case, attempt, y, &scale, now_ms));
            }
        }
        let ticks = (0..=4)
            .map(|i| {
                let ms = start + (span * f64::from(i) / 4.0) as i64;
                (scale(ms), duration(ms - start))
            })
            .collect();
        Self { height: 30.0 + lanes.len() as f64 * LANE, lanes: names, bars, ticks }
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
        title: format!(
            "{case} #{} on {}: {} ({took})",
            attempt.attempt,
            attempt.device.as_deref().unwrap_or("?"),
            attempt.result
        ),
    }
}

/// A case's durations, oldest left, as a line with a dot per attempt.
#[derive(Debug, Clone)]
pub struct Trend {
    pub points: String,
    pub dots: Vec<(f64, f64, String, String)>,
    pub max_label: String,
}

pub const TREND_HEIGHT: f64 = 160.0;

impl Trend {
    pub fn new(attempts: &[CaseAttemptView]) -> Self {
        let timed: Vec<&CaseAttemptView> = attempts.iter().rev().filter(|a| a.ms.is_some()).collect();
        let max = timed.iter().filter_map(|a| a.ms).max().unwrap_or(1).max(1);
        let step = if timed.len() > 1 { (WIDTH - 60.0) / (timed.len() - 1) as f64 } else { 0.0 };
        let mut points = Vec::new();
        let mut dots = Vec::new();
        for (index, attempt) in timed.iter().enumerate() {
            let ms = attempt.ms.unwrap_or_default();
            let x = 40.0 + index as f64 * step;
            let y = TREND_HEIGHT - 20.0 - ms as f64 / max as f64 * (TREND_HEIGHT - 40.0);
            points.push(format!("{x:.1},{y:.1}"));
            let title = format!("{} #{}: {} ({})", attempt.run_id, attempt.attempt, attempt.result, duration(ms));
            dots.push((x, y, attempt.result.clone(), title));
        }
        Self { points: points.join(" "), dots, max_label: duration(max) }
    }
}
