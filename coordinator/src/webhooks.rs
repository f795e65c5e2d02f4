//! The webhooks task: turns each kept event into a delivery per webhook
//! that wants it, and sends due deliveries, each retried with backoff
//! until it is taken, refused (a 4xx) or out of time. A tracked task of its
//! own: a slow or dead receiver never holds the owner task or a run.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use futures_util::future::join_all;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use argus_history::notify::{self, Delivery, Event, Tried, Webhook};
use argus_store::{DeliveryTried, DueDelivery, Store, StoreError};

/// How often events and due deliveries are looked for.
const EVERY: Duration = Duration::from_millis(500);
/// How long one try may take, from connecting to the answer's last byte.
pub const TRY_TIMEOUT: Duration = Duration::from_secs(10);
/// Events turned into deliveries, and deliveries sent, per pass.
const BATCH: u32 = 64;
/// The most of an answer kept (its start, for the dashboard).
const ANSWER_KEPT: usize = 512;

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Body>;

/// What the task sends with.
#[derive(Clone)]
pub struct Webhooks {
    pub hooks: Arc<[Webhook]>,
    /// The dashboard's public address, for the links in payloads.
    pub dashboard: Option<String>,
    /// A delivery not taken within this long of its event is abandoned.
    pub retry_for: Duration,
}

/// Starts the webhooks task.
pub fn start(store: Store, webhooks: Webhooks, shutdown: CancellationToken, tasks: &TaskTracker) {
    let connector =
        hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots().https_or_http().enable_http1().build();
    let client: HttpsClient = Client::builder(TokioExecutor::new()).build(connector);
    if !webhooks.hooks.is_empty() {
        let names: Vec<&str> = webhooks.hooks.iter().map(|h| h.name.as_str()).collect();
        info!(webhooks = ?names, "telling webhooks");
    }
    let span = tracing::info_span!("webhooks");
    argus_proto::task::periodically(span, EVERY, EVERY, shutdown, tasks, move || {
        let (store, webhooks, client) = (store.clone(), webhooks.clone(), client.clone());
        async move {
            if let Err(error) = pass(&store, &webhooks, &client).await {
                warn!(%error, "webhooks: the store could not answer; trying again shortly");
            }
        }
    });
}

/// One pass: new events into deliveries, then the due deliveries sent.
async fn pass(store: &Store, webhooks: &Webhooks, client: &HttpsClient) -> Result<(), StoreError> {
    loop {
        let events = store.events_to_dispatch(BATCH).await?;
        if events.is_empty() {
            break;
        }
        let mut deliveries = Vec::new();
        for row in &events {
            match serde_json::from_str::<Event>(&row.event_json) {
                Ok(event) => deliveries.extend(
                    webhooks
                        .hooks
                        .iter()
                        .filter(|h| h.wants(&event))
                        .map(|h| (row.id, h.name.clone(), row.kind.clone())),
                ),
                Err(error) => warn!(event = row.id, %error, "an event does not read back; no webhook is told of it"),
            }
        }
        let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
        store.dispatch(&ids, &deliveries, argus_grid::time::now_ms()).await?;
        if events.len() < BATCH as usize {
            break;
        }
    }
    if webhooks.hooks.is_empty() {
        return Ok(());
    }
    let due = store.due_deliveries(argus_grid::time::now_ms(), BATCH).await?;
    if due.is_empty() {
        return Ok(());
    }
    let tried = join_all(due.iter().map(|d| try_once(webhooks, client, d))).await;
    let now = argus_grid::time::now_ms();
    let outcomes: Vec<DeliveryTried> =
        due.iter().zip(tried).map(|(due, outcome)| judge(webhooks, due, outcome, now)).collect();
    store.deliveries_tried(&outcomes, now).await
}

/// What one try came to: the answer's status, or why there was none.
enum Outcome {
    Answered(u16, String),
    NoAnswer(String),
    /// Nothing to send (a commit status for a run without a commit) or no
    /// such webhook any more.
    Nothing(String),
}

async fn try_once(webhooks: &Webhooks, client: &HttpsClient, due: &DueDelivery) -> Outcome {
    let Some(hook) = webhooks.hooks.iter().find(|h| h.name == due.delivery.webhook) else {
        return Outcome::Nothing(format!("no webhook named {:?} is configured any more", due.delivery.webhook));
    };
    let event: Event = match serde_json::from_str(&due.event_json) {
        Ok(event) => event,
        Err(error) => return Outcome::Nothing(format!("the event does not read back: {error}")),
    };
    let delivery = due.delivery.id.to_string();
    let Some(request) = notify::request(hook, &event, &delivery, webhooks.dashboard.as_deref()) else {
        return Outcome::Nothing("nothing to send for this event (a run without a commit)".into());
    };
    let mut builder = ::http::Request::post(&request.url);
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let request = match builder.body(Body::from(request.body)) {
        Ok(request) => request,
        Err(error) => return Outcome::Nothing(format!("the request cannot be made: {error}")),
    };
    let sent = async {
        let response = client.request(request).await.map_err(|e| describe(&e))?;
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(Body::new(response.into_body()), 64 * 1024).await.unwrap_or_default();
        let text: String = String::from_utf8_lossy(&body).chars().take(ANSWER_KEPT).collect();
        Ok::<_, String>((status, text))
    };
    match tokio::time::timeout(TRY_TIMEOUT, sent).await {
        Ok(Ok((status, text))) => Outcome::Answered(status, text),
        Ok(Err(error)) => Outcome::NoAnswer(error),
        Err(_) => Outcome::NoAnswer(format!("no answer within {} s", TRY_TIMEOUT.as_secs())),
    }
}

/// A client error with its causes, as far as they go.
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Where a delivery stands after a try (the policy is
/// `argus_history::notify::after_try`).
fn judge(webhooks: &Webhooks, due: &DueDelivery, outcome: Outcome, now: i64) -> DeliveryTried {
    let delivery = &due.delivery;
    let attempts = u32::try_from(delivery.attempts).unwrap_or(u32::MAX).saturating_add(1);
    let keep = |text: String| Some(text).filter(|t| !t.is_empty());
    let (tried, status, error) = match outcome {
        Outcome::Answered(status, text) => (Tried::Answered(status), Some(i64::from(status)), keep(text)),
        Outcome::NoAnswer(error) => (Tried::NoAnswer, None, Some(error)),
        Outcome::Nothing(why) => (Tried::Nothing, None, Some(why)),
    };
    let next = notify::after_try(tried, attempts, now, delivery.created_at, webhooks.retry_for);
    let next_at = match next {
        Delivery::Pending(at) => at,
        _ => now,
    };
    if !matches!(next, Delivery::Delivered | Delivery::Pending(_)) {
        warn!(delivery = delivery.id, webhook = %delivery.webhook, state = next.state(), ?status, ?error, "a webhook delivery ended undelivered");
    }
    DeliveryTried { id: delivery.id, state: next.state().to_owned(), status, error, next_at }
}
