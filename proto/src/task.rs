//! How every task of Argus starts: with a name, carried as a span by its log
//! lines and traces, and kept by whoever waits for it (its `JoinHandle`, or
//! a `TaskTracker` that spawns it). `tokio::spawn` itself is refused
//! everywhere else (`clippy.toml`), so that no task runs anonymous.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

/// Starts `future` as the task `name`; the caller keeps the handle (or
/// drops it for a task that ends by itself, such as one reading a pipe to
/// its end).
#[allow(clippy::disallowed_methods)] // The one place tasks start.
pub fn spawn<F>(name: &'static str, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(future.instrument(tracing::info_span!("task", name)))
}

/// Runs blocking `work` (CPU work of hundreds of milliseconds, a blocking
/// call) on tokio's blocking threads as the task `name`, in its span; the
/// caller awaits the handle. `tokio::task::spawn_blocking` itself is
/// refused everywhere else (`clippy.toml`).
#[allow(clippy::disallowed_methods)] // The one place blocking work starts.
pub fn blocking<F, T>(name: &'static str, work: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let span = tracing::info_span!("task", name);
    tokio::task::spawn_blocking(move || span.in_scope(work))
}

/// Runs `work` in a task `tasks` tracks, `first` after the start and then
/// every `every`, until `shutdown` (which also stops a pass midway: each
/// pass must be made of steps that are whole on their own, such as
/// transactions).
pub fn periodically<F, Fut>(
    span: tracing::Span,
    first: Duration,
    every: Duration,
    shutdown: CancellationToken,
    tasks: &TaskTracker,
    mut work: F,
) where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    #[allow(clippy::disallowed_methods)] // A tracked task, named by its span.
    tasks.spawn(
        async move {
            let mut wait = first.min(every);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                wait = every;
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    () = work() => {}
                }
            }
        }
        .instrument(span),
    );
}
