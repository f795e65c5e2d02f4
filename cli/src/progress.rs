//! What `argus run` shows while a run goes. On a terminal, a progress bar
//! under the finished cases: done of total, passed, failed, what each device
//! runs now, the time so far and, when the cases have a history, an
//! estimate of what is left. In CI (no terminal, or `CI` set), plain lines
//! only: the bar is never drawn into a log.

use std::collections::{BTreeMap, HashMap};
use std::io::IsTerminal;
use std::time::Duration;

use argus_proto::run::CaseResult;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Progress {
    /// None when nothing is drawn.
    bar: Option<ProgressBar>,
    passed: usize,
    failed: usize,
    unsupported: usize,
    /// Device → what it runs now.
    running: BTreeMap<String, String>,
    /// Case → its expected duration, for the cases not finished yet.
    left: HashMap<String, u64>,
    /// Whether the estimates come from history (else none is shown).
    estimated: bool,
}

impl Progress {
    /// A progress for `cases`, each with its expected duration.
    pub fn new(cases: &[String], expected_ms: &[u64], from_history: bool) -> Self {
        let live =
            std::io::stderr().is_terminal() && std::io::stdout().is_terminal() && std::env::var_os("CI").is_none();
        let bar = live.then(|| {
            let bar = ProgressBar::with_draw_target(Some(cases.len() as u64), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{elapsed:>4} {bar:24.green/red} {pos}/{len} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("█▌ ");
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        let left = cases.iter().cloned().zip(expected_ms.iter().copied()).collect();
        Self { bar, passed: 0, failed: 0, unsupported: 0, running: BTreeMap::new(), left, estimated: from_history }
    }

    pub fn started(&mut self, device: &str, what: &str) {
        self.running.insert(device.to_owned(), what.to_owned());
    }

    /// An attempt ended on `device`: with its case's last result, or (for
    /// an attempt taken back) without.
    pub fn ended(&mut self, device: &str, case: &str, result: Option<CaseResult>) {
        self.running.remove(device);
        // A step that was reported late must not keep the case on show.
        let of_case = format!("{case} ›");
        self.running.retain(|_, what| what != case && !what.starts_with(&of_case));
        match result {
            Some(CaseResult::Passed) => self.passed += 1,
            Some(CaseResult::Failed) => self.failed += 1,
            Some(CaseResult::Unsupported) => self.unsupported += 1,
            None => return,
        }
        self.left.remove(case);
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    /// Prints what `say` prints above the bar, which is drawn again after.
    pub fn say(&self, say: impl FnOnce()) {
        match &self.bar {
            Some(bar) => bar.suspend(say),
            None => say(),
        }
    }

    /// Draws the bar with what is true now.
    pub fn show(&self) {
        let Some(bar) = &self.bar else { return };
        let mut message = format!("{} passed", self.passed);
        if self.failed > 0 {
            message.push_str(&format!(", {} failed", self.failed));
        }
        if self.unsupported > 0 {
            message.push_str(&format!(", {} unsupported", self.unsupported));
        }
        if let Some(left) = self.estimate() {
            message.push_str(&format!(" · ~{} left", crate::summary::seconds(left)));
        }
        if !self.running.is_empty() {
            let devices: Vec<String> = self.running.iter().map(|(d, c)| format!("{d}: {c}")).collect();
            message.push_str(&format!(" · {}", devices.join(" · ")));
        }
        bar.set_message(message);
    }

    /// What is left, from the cases' history: their expected time spread
    /// over the devices running now.
    fn estimate(&self) -> Option<Duration> {
        if !self.estimated || self.left.is_empty() {
            return None;
        }
        let devices = self.running.len().max(1) as u64;
        Some(Duration::from_millis(self.left.values().sum::<u64>() / devices))
    }

    /// Removes the bar for good.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_left_is_the_history_of_the_cases_not_done_over_the_devices_running() {
        let cases = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let mut progress = Progress::new(&cases, &[4_000, 2_000, 2_000], true);
        progress.started("d1", "a");
        progress.started("d2", "b");
        assert_eq!(progress.estimate(), Some(Duration::from_millis(4_000)));
        progress.ended("d1", "a", Some(CaseResult::Passed));
        progress.ended("d2", "b", None);
        assert_eq!(progress.estimate(), Some(Duration::from_millis(4_000)), "b is taken back, not done");
        let guessed = Progress::new(&cases, &[30_000, 30_000, 30_000], false);
        assert_eq!(guessed.estimate(), None, "no history, no estimate");
    }
}
