//! Logs, and OpenTelemetry traces when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set.
//!
//! Traces go out over OTLP/HTTP with protobuf bodies, batched on the exporter's own thread. Each
//! GraphQL operation is a span (`graphql.operation`, under the HTTP request's span), each store
//! call one below it (`store.*`), and each SQL statement one below that (sea-orm's
//! `sea_orm.query_all`, `sea_orm.execute`, …, with the statement's text: values are bound, never
//! in it). The spans the export needs are at `debug` level, and the log filter's default leaves
//! them off: without the variable no layer is installed and they are never built, so tracing
//! costs a disabled callsite's check per span site.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Level;
use tracing_subscriber::filter::{FilterExt, Targets, filter_fn};
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// `RUST_LOG` when it is unset.
pub const DEFAULT_LOG_FILTER: &str = "info,sqlx=warn,sea_orm=warn";

/// The service name traces carry unless `OTEL_SERVICE_NAME` says otherwise.
pub const SERVICE_NAME: &str = "honcho-graphql";

/// Longest client-given text (URI, operation name, request id) a span carries, in bytes: a span
/// waits in the export queue (2,048 of them by default), so a client must not make it large.
pub const MAX_CLIENT_TEXT: usize = 256;

/// `s` cut to [`MAX_CLIENT_TEXT`] bytes, at a character boundary.
pub fn clip(s: &str) -> &str {
    &s[..s.floor_char_boundary(MAX_CLIENT_TEXT)]
}

/// Keeps the trace exporter of [`init`] alive; dropping it sends the spans still queued.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("OpenTelemetry: the last spans were not sent: {e}");
        }
    }
}

/// The collector to send traces to, from the standard variables (unset or empty: none).
pub fn otlp_endpoint() -> Option<String> {
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .into_iter()
    .filter_map(|var| std::env::var(var).ok())
    .find(|v| !v.trim().is_empty())
}

/// The trace exporter could not be built.
#[derive(Debug, thiserror::Error)]
#[error("setting up trace export: {0}")]
pub struct TelemetryError(String);

/// Installs the process's tracing subscriber: logs filtered by `RUST_LOG` (on stdout, or on
/// stderr with `to_stderr`), and with an OTLP endpoint configured, a second layer that exports
/// spans.
pub fn init(to_stderr: bool) -> Result<Telemetry, TelemetryError> {
    let logs = EnvFilter::try_from_default_env().unwrap_or_else(|_| DEFAULT_LOG_FILTER.into());
    let writer = if to_stderr {
        BoxMakeWriter::new(std::io::stderr)
    } else {
        BoxMakeWriter::new(std::io::stdout)
    };
    if otlp_endpoint().is_none() {
        tracing_subscriber::fmt()
            .with_env_filter(logs)
            .with_writer(writer)
            .init();
        return Ok(Telemetry { provider: None });
    }
    // The exporter reads the endpoint, headers, timeout and compression from the standard
    // OTEL_EXPORTER_OTLP_* variables itself (appending /v1/traces to the generic endpoint).
    // The exporter builds its own (blocking) reqwest client, which needs the crypto provider.
    crate::outbound::install_crypto_provider();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .map_err(|e| TelemetryError(e.to_string()))?;
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| SERVICE_NAME.to_owned());
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name(service).build())
        .build();
    let traces = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(SERVICE_NAME))
        .with_filter(exported());
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_filter(logs),
        )
        .with(traces)
        .init();
    Ok(Telemetry {
        provider: Some(provider),
    })
}

/// What becomes part of a trace: this crate's spans (requests, operations, store calls) and
/// sea-orm's statement spans, plus warnings and errors as span events. Debug and info log
/// lines stay out of traces.
fn exported<S: tracing::Subscriber>() -> impl tracing_subscriber::layer::Filter<S> {
    let spans = Targets::new()
        .with_target("honcho_graphql", Level::DEBUG)
        .with_target("sea_orm", Level::INFO);
    spans.and(filter_fn(|meta| {
        meta.is_span() || *meta.level() <= Level::WARN
    }))
}
