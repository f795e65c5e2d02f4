//! What happened to the app during an attempt, and what the attempt makes
//! of it. The driver holds the calls in flight while the app reconnects and
//! resends them after its `hello`, so an attempt carries on either way; the
//! driver also tells, at each hello, whether the process is the one it had
//! ([`crate::driver::AppIdentity`]). An attempt compares the identity before
//! its first step with the one after its last, and asks the app nothing:
//!
//! - the same process reconnected (a flaky link): its state is whole and
//!   its resent calls were answered from its memory, so the attempt stands,
//!   with the reconnects named on it;
//! - another process answered (a relaunch): the attempt's state is lost,
//!   and what the rest of it found says nothing about the case: an
//!   infrastructure failure, run again;
//! - processes kept replacing each other's open connections: two apps dial
//!   the port, an infrastructure failure named as such.

use crate::driver::{AppChange, AppIdentity, Driver};

/// The app on a port as the steps started.
pub(crate) struct AppMark {
    at_start: AppIdentity,
    port: u16,
}

/// The attempt's verdict on the app.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The attempt stands; `Some` names what the link did during it.
    Stands(Option<String>),
    /// The attempt proves nothing about the case: why.
    RunAgain(String),
}

impl AppMark {
    /// The process that answers the first step: taken once the app has
    /// settled, so that a `before` hook's relaunch is the attempt's start.
    pub(crate) fn now(driver: &Driver) -> Self {
        Self { at_start: driver.identity(), port: driver.local_addr().port() }
    }

    /// Once the steps have run.
    pub(crate) fn verdict(&self, driver: &Driver) -> Verdict {
        verdict(driver.identity().since(self.at_start), self.port)
    }
}

fn verdict(change: AppChange, port: u16) -> Verdict {
    match change {
        AppChange::Steady => Verdict::Stands(None),
        AppChange::Reconnected(n) => Verdict::Stands(Some(format!(
            "the app reconnected {n} time{} during the attempt (a flaky link; its calls were resent to the same process)",
            if n == 1 { "" } else { "s" }
        ))),
        AppChange::Relaunched => Verdict::RunAgain(
            "the app was relaunched during the attempt (another process said hello; the attempt's state was lost)"
                .into(),
        ),
        AppChange::TwoApps(n) => Verdict::RunAgain(format!(
            "two apps seem to dial port {port}: their connections replaced each other {n} times during the attempt"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flaky_link_keeps_the_attempt_and_names_it() {
        assert_eq!(verdict(AppChange::Steady, 1), Verdict::Stands(None));
        let Verdict::Stands(Some(note)) = verdict(AppChange::Reconnected(10), 1) else { panic!() };
        assert!(note.starts_with("the app reconnected 10 times during the attempt"), "{note}");
        let Verdict::Stands(Some(once)) = verdict(AppChange::Reconnected(1), 1) else { panic!() };
        assert!(once.starts_with("the app reconnected 1 time during"), "{once}");
    }

    #[test]
    fn a_relaunch_and_two_apps_run_again() {
        assert!(matches!(verdict(AppChange::Relaunched, 1), Verdict::RunAgain(why) if why.contains("relaunched")));
        assert_eq!(
            verdict(AppChange::TwoApps(4), 8123),
            Verdict::RunAgain(
                "two apps seem to dial port 8123: their connections replaced each other 4 times during the attempt"
                    .into()
            )
        );
    }
}
