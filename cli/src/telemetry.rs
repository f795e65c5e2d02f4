//! Logs and traces. Logs go to stderr, so that stdout carries only results;
//! `ARGUS_LOG` (or `RUST_LOG`) overrides the command's default level. When
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set, spans are also exported over OTLP
//! (gRPC), named after the command's service.

use std::time::Duration;

use opentelemetry::trace::TracerProvider;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Spans exported: ours at info, none of the transport's (nor the
/// exporter's own, which would feed itself).
const TRACED: &str =
    "info,h2=off,hyper=off,hyper_util=off,tonic=off,tower=off,opentelemetry=off,opentelemetry_sdk=off,sqlx=off";

/// The span exporter, if any; `shutdown` sends what is still buffered.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Sends what is buffered (for at most five seconds) and stops.
    pub async fn shutdown(self) {
        if let Some(provider) = self.provider {
            let flushed = argus_proto::task::blocking("flush traces", move || {
                provider.shutdown_with_timeout(Duration::from_secs(5))
            });
            if let Ok(Err(error)) = flushed.await {
                eprintln!("argus: spans were not all exported: {error}");
            }
        }
    }
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

pub fn init(default_level: &str, service: &'static str, format: LogFormat) -> Telemetry {
    let filter = std::env::var("ARGUS_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .and_then(|spec| EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| EnvFilter::new(default_level));
    // Colour only on a terminal: a CI log or a file gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi).boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer().json().with_writer(std::io::stderr).boxed(),
    }
    .with_filter(filter);
    let provider = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok().filter(|endpoint| !endpoint.is_empty()).and_then(
        |endpoint| match exporter(service) {
            Ok(provider) => Some(provider),
            Err(error) => {
                eprintln!("argus: no traces: cannot export to OTEL_EXPORTER_OTLP_ENDPOINT={endpoint}: {error}");
                None
            }
        },
    );
    let traces = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer().with_tracer(provider.tracer("argus")).with_filter(EnvFilter::new(TRACED))
    });
    let _ = tracing_subscriber::registry().with(logs).with(traces).try_init();
    Telemetry { provider }
}

/// The OTLP exporter reads the endpoint (and headers, timeout) from the
/// standard `OTEL_EXPORTER_OTLP_*` variables itself.
fn exporter(service: &'static str) -> Result<SdkTracerProvider, opentelemetry_otlp::ExporterBuildError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic().build()?;
    let resource = Resource::builder()
        .with_service_name(service)
        .with_attribute(opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build())
}
