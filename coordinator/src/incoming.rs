//! Accepted connections, checked before gRPC sees them: a TLS handshake on a
//! plaintext port, or plaintext on a TLS port, is refused with a log line
//! that says what the client should change (tonic alone would log an
//! opaque HTTP/2 or TLS error at debug level).

use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// The first byte of every TLS connection: a handshake record.
const TLS_HANDSHAKE: u8 = 0x16;
/// A fatal `protocol_version` alert: what a TLS client is answered on the
/// plaintext port, so that it can say the server does not speak TLS.
const NO_TLS_HERE: [u8; 7] = [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x46];

/// Connections from `listener` that speak what this port speaks.
pub fn checked(
    listener: TcpListener,
    tls: bool,
    shutdown: CancellationToken,
) -> ReceiverStream<std::io::Result<TcpStream>> {
    let (tx, rx) = mpsc::channel(64);
    argus_proto::task::spawn("accept connections", async move {
        loop {
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // Leases and results are small messages that must not wait for
            // Nagle's algorithm (40 ms behind a delayed ACK).
            let _ = stream.set_nodelay(true);
            let tx = tx.clone();
            argus_proto::task::spawn("sniff a connection", async move {
                let mut first = [0u8; 1];
                // A client that sends nothing for ten seconds is not kept.
                match tokio::time::timeout(Duration::from_secs(10), stream.peek(&mut first)).await {
                    Ok(Ok(1..)) => {}
                    _ => return,
                }
                let speaks_tls = first[0] == TLS_HANDSHAKE;
                if speaks_tls && !tls {
                    let mut stream = stream;
                    let _ = tokio::io::AsyncWriteExt::write_all(&mut stream, &NO_TLS_HERE).await;
                    warn!(%peer, "a client spoke TLS to this plaintext port: it should connect with http://, or start the coordinator with --tls-cert and --tls-key");
                    return;
                }
                if !speaks_tls && tls {
                    warn!(%peer, "a client spoke plaintext to this TLS port: it should connect with https:// (and --tls-ca if its CA is private)");
                    return;
                }
                let _ = tx.send(Ok(stream)).await;
            });
        }
    });
    ReceiverStream::new(rx)
}
