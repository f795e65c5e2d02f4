//! One app connection: handshake, `auth`, then read frames until the app
//! goes, a newer connection replaces it, it sends something malformed, or it
//! stops answering pings.

use std::sync::Arc;
use std::time::Duration;

use argus_proto::wire::{AppMessage, Response, WireError};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::error::{Error as WsError, ProtocolError};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::{CallError, Shared};

/// See [`serve`]: enough for a screen in one read or two.
const READ_BUFFER_BYTES: usize = 16 * 1024;

pub(super) async fn serve(shared: Arc<Shared>, stream: TcpStream, cancel: CancellationToken) {
    let config = &shared.config;
    // Requests are small and latency-bound.
    let _ = stream.set_nodelay(true);
    // Each read zeroes up to the read buffer's size before it reads
    // (tungstenite 0.30): 128 KiB by default, a memset per message that was
    // 8% of a busy grid's CPU. Messages are small; a bigger one reserves its
    // whole length once its header is read.
    let ws_config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_message_size(Some(config.max_message_bytes))
        .max_frame_size(Some(config.max_message_bytes));
    let handshake = tokio_tungstenite::accept_async_with_config(stream, Some(ws_config));
    let socket = tokio::select! {
        _ = cancel.cancelled() => return,
        done = tokio::time::timeout(config.handshake_timeout, handshake) => match done {
            Ok(Ok(socket)) => socket,
            Ok(Err(error)) => {
                warn!(%error, "websocket handshake failed; connection dropped");
                return;
            }
            Err(_) => {
                warn!(
                    timeout_ms = config.handshake_timeout.as_millis() as u64,
                    "client did not finish the websocket handshake in time; connection dropped"
                );
                return;
            }
        },
    };
    let (sink, mut frames) = socket.split();
    let sink = Arc::new(tokio::sync::Mutex::new(sink));
    let link_cancel = cancel.child_token();
    let Some(link) = shared.attach(sink.clone(), link_cancel.clone()) else {
        return;
    };
    debug!(link, "app connected; sending auth");
    if sink.lock().await.send(Message::Text(shared.auth.clone())).await.is_err() {
        shared.detached(link);
        return;
    }

    // An app that never answers auth is reported once (a wrong token?).
    let auth_deadline = tokio::time::sleep(config.auth_timeout);
    tokio::pin!(auth_deadline);
    let mut auth_checked = false;
    let mut last_heard = Instant::now();
    let mut ping = tokio::time::interval_at(Instant::now() + config.ping_interval, config.ping_interval);
    ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let close: Option<CloseFrame> = loop {
        tokio::select! {
            _ = link_cancel.cancelled() => break Some(close_frame(CloseCode::Away, "replaced by a newer connection")),
            frame = frames.next() => {
                let Some(frame) = frame else {
                    info!(link, "app closed the connection");
                    break None;
                };
                last_heard = Instant::now();
                match frame {
                    Ok(Message::Text(text)) => {
                        if let Err(error) = on_text(&shared, link, &text).await {
                            warn!(link, %error, "malformed message from the app; closing its connection");
                            break Some(close_frame(CloseCode::Invalid, "malformed message"));
                        }
                    }
                    Ok(Message::Binary(bytes)) => {
                        warn!(link, bytes = bytes.len(), "binary frame from the app (the protocol is JSON text); closing its connection");
                        break Some(close_frame(CloseCode::Unsupported, "binary frames are not part of the protocol"));
                    }
                    Ok(Message::Close(_)) => {
                        info!(link, "app closed the connection");
                        break None;
                    }
                    Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => {}
                    // An app that goes away without a goodbye is normal.
                    Err(WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) | WsError::Io(_) | WsError::ConnectionClosed) => {
                        info!(link, "app connection dropped");
                        break None;
                    }
                    Err(error) => {
                        warn!(link, %error, "bad frame from the app; closing its connection");
                        break Some(close_frame(CloseCode::Policy, "bad frame"));
                    }
                }
            }
            _ = &mut auth_deadline, if !auth_checked => {
                auth_checked = true;
                shared.silent(link);
            }
            _ = ping.tick() => {
                let silent = last_heard.elapsed();
                if silent > config.liveness_timeout {
                    warn!(link, silent_ms = silent.as_millis() as u64, "app stopped answering pings; closing its connection");
                    break Some(close_frame(CloseCode::Away, "no answer to pings"));
                }
                let _ = sink.lock().await.send(Message::Ping(Default::default())).await;
            }
        }
    };
    shared.detached(link);
    if let Some(frame) = close {
        // A dead peer may never drain its buffer: give up on politeness quickly.
        let goodbye = async { sink.lock().await.send(Message::Close(Some(frame))).await };
        let _ = tokio::time::timeout(Duration::from_millis(500), goodbye).await;
    }
}

async fn on_text(shared: &Arc<Shared>, link: u64, text: &str) -> Result<(), WireError> {
    match AppMessage::parse(text)? {
        AppMessage::Response(Response { id, outcome }) => shared.answered(id, outcome.map_err(CallError::App)),
        AppMessage::Hello(hello) => shared.attached(link, hello),
        AppMessage::Navigation(navigation) => {
            debug!(link, route = ?navigation.route, "navigation");
            let _ = shared.events.send(super::DriverEvent::Navigation(navigation.route));
        }
        AppMessage::OtherEvent(event) => debug!(link, event, "unknown event from the app ignored"),
    }
    Ok(())
}

fn close_frame(code: CloseCode, reason: &'static str) -> CloseFrame {
    CloseFrame { code, reason: reason.into() }
}
