//! A finished attempt as `argus run` prints it.

use argus_proto::run::{CaseResult, RunCase};

pub(super) fn print_line(line: &RunCase, device: &str) {
    let seconds = line.ms as f64 / 1000.0;
    let retry = if line.attempt > 1 { format!(" (attempt {})", line.attempt) } else { String::new() };
    match line.result {
        CaseResult::Passed => outln!("✓ {}{retry}  {seconds:.1}s  {device}", line.id),
        CaseResult::Failed => {
            outln!("✗ {}{retry}  {seconds:.1}s  {device}", line.id);
            if let Some(step) = line.steps.iter().find(|s| s.error.is_some()) {
                outln!("    {}: {}", step.step, step.error.as_deref().unwrap_or(""));
            }
        }
        CaseResult::Unsupported => {
            let why = line.steps.iter().find_map(|s| s.error.as_deref()).unwrap_or("unsupported");
            outln!("∅ {}{retry}  cannot run on {device}: {why}", line.id);
        }
    }
}
