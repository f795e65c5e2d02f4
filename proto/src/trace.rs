//! W3C trace context across process boundaries: in gRPC metadata (client to
//! coordinator), in leases (coordinator to worker) and to the app (its
//! `traceContext` command). Without an OpenTelemetry layer installed a span
//! has no context, and nothing is carried.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C header, and the gRPC metadata key that carries it.
pub const TRACEPARENT: &str = "traceparent";

/// `span`'s context as a `traceparent` value, if it is being traced.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// Makes `span` a child of the remote span `traceparent` names; a missing
/// or malformed value leaves it a root.
pub fn set_parent(span: &tracing::Span, traceparent: &str) {
    if traceparent.is_empty() {
        return;
    }
    let carrier = HashMap::from([(TRACEPARENT.to_owned(), traceparent.to_owned())]);
    let context = TraceContextPropagator::new().extract(&carrier);
    if context.span().span_context().is_valid() {
        let _ = span.set_parent(context);
    }
}

/// Adds `span`'s context to a gRPC request's metadata.
pub fn inject<T>(request: &mut tonic::Request<T>, span: &tracing::Span) {
    if let Some(value) = traceparent(span).and_then(|v| v.parse().ok()) {
        request.metadata_mut().insert(TRACEPARENT, value);
    }
}

/// The `traceparent` a gRPC request carries, or "".
pub fn extract(metadata: &tonic::metadata::MetadataMap) -> String {
    metadata.get(TRACEPARENT).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_untraced_span_carries_nothing() {
        let mut request = tonic::Request::new(());
        inject(&mut request, &tracing::Span::none());
        assert_eq!(extract(request.metadata()), "");
        set_parent(&tracing::Span::none(), "not a traceparent");
    }
}
