//! An attempt replayed step by step from its record: at each step the
//! screen as it was after it (drawn like the live view), the requests,
//! events and problems of that step, its time, and its screenshot and film
//! position when there are some. A failed attempt carries its baseline's
//! steps too, with the elements that differ at the same step marked.

use std::collections::HashMap;

use argus_proto::grpc::{AttemptObserved, ObservedElement, StepObservation};
use argus_proto::run::RunCase;
use argus_store::Store;
use prost::Message;
use serde::Serialize;

use crate::explain::ExplainError;
use crate::explain::diff::ElementName;
use argus_grid::live::ElementView;

#[derive(Debug, Clone, Serialize)]
pub struct Replay {
    pub run_id: String,
    pub case_id: String,
    pub attempt: u32,
    pub result: String,
    pub device: String,
    pub steps: Vec<ReplayStep>,
    /// The pass a failure is compared with.
    pub baseline: Option<ReplayBaseline>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReplayBaseline {
    pub run_id: String,
    pub attempt: u32,
    pub device: String,
    pub steps: Vec<ReplayStep>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReplayStep {
    pub index: u32,
    pub step: String,
    pub status: String,
    pub ms: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// The screen was read after the step (app steps that ran).
    pub screen_read: bool,
    pub route: String,
    pub window: [f32; 2],
    pub elements: Vec<ElementView>,
    /// Which of `elements` differ from the other side's same step (a
    /// failure against its baseline, and the baseline against it).
    pub differs: Vec<usize>,
    pub requests: Vec<String>,
    pub events: Vec<String>,
    pub problems: Vec<String>,
    /// The step's screenshot, relative to the run directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screenshot: Option<String>,
    /// Where the step begins in the attempt's film, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub video_s: Option<f64>,
}

/// Attempt `attempt` of `case_id` in `run_id` replayed; `None` when no
/// record of it is kept (it passed outside the records' window, or its
/// worker records none).
pub async fn replay(store: &Store, run_id: &str, case_id: &str, attempt: u32) -> Result<Option<Replay>, ExplainError> {
    let Some(row) = store.observation(run_id, case_id, i64::from(attempt)).await? else { return Ok(None) };
    let observed = decode(&row)?;
    let line = run_case(store, run_id, case_id, attempt).await?;
    let mut steps = replay_steps(&observed, line.as_ref());
    let mut baseline = None;
    if let Some(key) = row.baseline_key()
        && let Some(base_row) = store.observation_of(&key).await?
    {
        let base_observed = decode(&base_row)?;
        let base_line = run_case(store, &base_row.run_id, case_id, base_row.attempt as u32).await?;
        let mut base_steps = replay_steps(&base_observed, base_line.as_ref());
        mark_differences(&mut steps, &observed.steps, &mut base_steps, &base_observed.steps);
        baseline = Some(ReplayBaseline {
            run_id: base_row.run_id.clone(),
            attempt: base_row.attempt as u32,
            device: base_row.device_id.clone(),
            steps: base_steps,
        });
    }
    Ok(Some(Replay {
        run_id: row.run_id.clone(),
        case_id: row.case_id.clone(),
        attempt,
        result: row.result.clone(),
        device: row.device_id.clone(),
        steps,
        baseline,
    }))
}

fn decode(row: &argus_store::ObservationRow) -> Result<AttemptObserved, ExplainError> {
    AttemptObserved::decode(row.body.as_slice()).map_err(|error| ExplainError::Undecodable {
        run: row.run_id.clone(),
        case: row.case_id.clone(),
        attempt: row.attempt,
        error,
    })
}

/// The attempt's lynkeus line: its screenshots and film positions.
async fn run_case(store: &Store, run_id: &str, case_id: &str, attempt: u32) -> Result<Option<RunCase>, ExplainError> {
    let attempts = store.run_attempts(run_id).await?;
    Ok(attempts
        .iter()
        .filter(|a| a.case_id == case_id && a.attempt == i64::from(attempt))
        .max_by_key(|a| a.try_no)
        .and_then(|a| a.run_case_json.as_deref())
        .and_then(|json| {
            serde_json::from_str(json)
                .inspect_err(|error| {
                    tracing::warn!(run = run_id, case = case_id, attempt, %error, "the attempt's line does not read back; replayed without its pictures");
                })
                .ok()
        }))
}

fn replay_steps(observed: &AttemptObserved, line: Option<&RunCase>) -> Vec<ReplayStep> {
    observed
        .steps
        .iter()
        .map(|s| {
            let run_step = line.and_then(|l| l.steps.get(s.index as usize));
            ReplayStep {
                index: s.index,
                step: s.step.clone(),
                status: s.status.clone(),
                ms: s.ms,
                error: s.error.clone(),
                screen_read: s.screen_read,
                route: s.route.clone(),
                window: [s.window_w, s.window_h],
                elements: s.elements.iter().map(ElementView::from).collect(),
                differs: Vec::new(),
                requests: s
                    .requests
                    .iter()
                    .map(|r| match (r.status, r.error.is_empty()) {
                        (0, false) => format!("{} {} failed: {}", r.method, r.url, r.error),
                        (status, _) => format!("{} {} {status} · {} ms", r.method, r.url, r.ms),
                    })
                    .collect(),
                events: s.events.clone(),
                problems: s.problems.iter().map(|p| format!("{}: {}", p.kind, p.message)).collect(),
                screenshot: run_step.and_then(|r| r.screenshot.clone()),
                video_s: run_step.and_then(|r| r.video_s),
            }
        })
        .collect()
}

/// An element as compared: its name (the nth of that name) and what a
/// person would notice.
type Seen = (ElementName, usize, String, String, bool, String, bool);

fn seen(elements: &[ObservedElement]) -> Vec<Seen> {
    let mut count: HashMap<ElementName, usize> = HashMap::new();
    elements
        .iter()
        .map(|e| {
            let name = ElementName::of(e);
            let n = count.entry(name.clone()).or_default();
            *n += 1;
            (name, *n, e.text.clone(), e.value.clone(), e.disabled, e.hidden.clone(), e.covered)
        })
        .collect()
}

/// Marks, step by step (by index), the elements each side has that the
/// other does not have as they are.
fn mark_differences(
    mine: &mut [ReplayStep],
    my_steps: &[StepObservation],
    theirs: &mut [ReplayStep],
    their_steps: &[StepObservation],
) {
    for (at, step) in my_steps.iter().enumerate() {
        let Some(their_at) = their_steps.iter().position(|t| t.index == step.index) else { continue };
        let their = &their_steps[their_at];
        if !step.screen_read || !their.screen_read {
            continue;
        }
        let (a, b) = (seen(&step.elements), seen(&their.elements));
        mine[at].differs = (0..a.len()).filter(|i| !b.contains(&a[*i])).collect();
        theirs[their_at].differs = (0..b.len()).filter(|i| !a.contains(&b[*i])).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use argus_proto::grpc::ElementFrame;

    fn element(test_id: &str, text: &str) -> ObservedElement {
        ObservedElement {
            kind: "button".into(),
            test_id: test_id.into(),
            text: text.into(),
            frame: Some(ElementFrame { x: 1.0, y: 2.0, w: 3.0, h: 4.0 }),
            ..Default::default()
        }
    }

    fn step(index: u32, elements: Vec<ObservedElement>) -> StepObservation {
        StepObservation { index, screen_read: true, route: "Home".into(), elements, ..Default::default() }
    }

    #[test]
    fn the_elements_that_differ_at_the_same_step_are_marked_on_both_sides() {
        let failed = AttemptObserved {
            steps: vec![
                step(0, vec![element("title", "Shop"), element("pay", "Pay 10 €")]),
                step(1, vec![element("title", "Shop")]),
            ],
            ..Default::default()
        };
        let passed = AttemptObserved {
            steps: vec![
                step(0, vec![element("title", "Shop"), element("pay", "Pay 12 €"), element("promo", "Sale")]),
                step(1, vec![element("title", "Shop")]),
            ],
            ..Default::default()
        };
        let (mut mine, mut theirs) = (replay_steps(&failed, None), replay_steps(&passed, None));
        mark_differences(&mut mine, &failed.steps, &mut theirs, &passed.steps);
        assert_eq!(mine[0].differs, [1], "the changed text");
        assert_eq!(theirs[0].differs, [1, 2], "the text it had, and what is gone");
        assert!(mine[1].differs.is_empty() && theirs[1].differs.is_empty());
        assert_eq!(mine[0].elements[1].frame, Some([1.0, 2.0, 3.0, 4.0]));
    }
}
