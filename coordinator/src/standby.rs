//! A standby coordinator: several coordinators on one Postgres, one active.
//! The active one holds an advisory lock ([`Store::try_lead`]); the others
//! try for it every second and meanwhile answer health as NOT_SERVING on
//! both ports, so that workers, clients and load balancers pass them by.
//! Once the lock is theirs they stop standing by and serve; the active one
//! that loses its lock's connection stops, since another may be active.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use argus_store::{Leadership, Store, StoreError};

/// How often a standby tries for the lock, and the active one checks it.
pub const LEASH: Duration = Duration::from_secs(1);

/// Stands by on `grpc` and `http` until this coordinator holds the lock
/// (its ports are free again when this returns) or `shutdown`.
pub async fn until_leading(
    store: &Store,
    grpc: TcpListener,
    http: TcpListener,
    shutdown: &CancellationToken,
) -> Result<Option<Leadership>, StoreError> {
    if let Some(lead) = store.try_lead().await? {
        info!("active: this coordinator holds the database's lock");
        return Ok(Some(lead));
    }
    info!("standing by: another coordinator holds the lock; NOT_SERVING until it goes");
    let standing = shutdown.child_token();
    let tasks = TaskTracker::new();
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_service_status("", tonic_health::ServingStatus::NotServing).await;
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(grpc);
    let stop = standing.clone();
    tasks.spawn(async move {
        let served = tonic::transport::Server::builder()
            .add_service(health)
            .serve_with_incoming_shutdown(incoming, stop.cancelled())
            .await;
        if let Err(error) = served {
            warn!(%error, "the standby's gRPC port stopped");
        }
    });
    let router = Router::new()
        .fallback(|| async { (StatusCode::SERVICE_UNAVAILABLE, "standing by: another coordinator is active\n") });
    tasks.spawn(crate::http::serve(http, router, standing.clone(), tasks.clone()));
    let since = Instant::now();
    let lead = loop {
        tokio::select! {
            _ = shutdown.cancelled() => break None,
            _ = tokio::time::sleep(LEASH) => {}
        }
        match store.try_lead().await {
            Ok(Some(lead)) => break Some(lead),
            Ok(None) => {}
            Err(error) => warn!(%error, "cannot try for the lock; trying again"),
        }
    };
    standing.cancel();
    tasks.close();
    tasks.wait().await;
    if lead.is_some() {
        info!(stood_by_s = since.elapsed().as_secs_f64(), "active: the lock is ours, taking over");
    }
    Ok(lead)
}

/// Binds `addr`, again for a while if the standby's socket has not let go.
pub async fn rebind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match TcpListener::bind(addr).await {
            Ok(listener) => return Ok(listener),
            Err(error) if Instant::now() < deadline && error.kind() == std::io::ErrorKind::AddrInUse => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => return Err(error),
        }
    }
}

/// Watches the lock of the active coordinator. When its connection fails
/// (Postgres restarted, say) it takes the lock again on a new connection as
/// soon as the database answers; if another coordinator took it first,
/// `shutdown` is cancelled and `lost` set, so that the process stops (a
/// supervisor starts it again, as a standby).
pub fn keep_leading(
    store: Store,
    mut lead: Leadership,
    shutdown: CancellationToken,
    lost: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    argus_proto::task::spawn(
        "leadership",
        tracing::Instrument::instrument(
            async move {
                loop {
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(LEASH) => {}
                    }
                    let Err(error) = lead.check().await else { continue };
                    let old = lead.pid();
                    warn!(%error, "the connection that holds the lock failed; taking the lock again");
                    lead.close().await;
                    lead = loop {
                        match store.try_lead().await {
                            Ok(Some(again)) => {
                                info!("active: the lock is ours again");
                                break again;
                            }
                            // The old connection's process may not have ended
                            // yet: the lock is still its own, not another's.
                            Ok(None) if store.lock_holders().await.is_ok_and(|pids| pids.contains(&old)) => {
                                info!(pid = old, "the lock's old connection has not ended yet; trying again");
                            }
                            Ok(None) => {
                                tracing::error!("another coordinator took the lock: it is active now; stopping");
                                lost.store(true, std::sync::atomic::Ordering::SeqCst);
                                shutdown.cancel();
                                return;
                            }
                            Err(error) => {
                                warn!(%error, "cannot reach the database to take the lock again; trying again")
                            }
                        }
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tokio::time::sleep(LEASH) => {}
                        }
                    };
                }
            },
            tracing::info_span!("leadership"),
        ),
    )
}
