//! How every task of Argus starts: with a name, carried as a span by its log
//! lines and traces, and kept by whoever waits for it (its `JoinHandle`, or
//! a `TaskTracker` that spawns it). `tokio::spawn` itself is refused
//! everywhere else (`clippy.toml`), so that no task runs anonymous.

use std::future::Future;

use tokio::task::JoinHandle;
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
