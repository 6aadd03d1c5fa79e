//! Logs on stderr (`RUST_LOG`, text or JSON) and, with the `otel` feature, traces exported
//! over OTLP — set up once in `main`, flushed on the way out.

use crate::args::{Cli, Command};

/// What must be flushed before the process exits.
pub struct LogGuard {
    #[cfg(feature = "otel")]
    traces: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl LogGuard {
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(p) = self.traces {
            if let Err(e) = p.shutdown() {
                eprintln!("quorum: traces not all exported: {e}");
            }
        }
    }
}

pub fn init_logs(format: &str, service: &str) -> LogGuard {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer};
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("error"));
    // openraft logs every failed RPC to a down peer (5 a second, at error level); the control
    // plane reports what matters itself.
    // sled logs every failed flush of a full disk (once per write, at error level); the review
    // says what that means once, naming the data dir. Ask for either by name in RUST_LOG.
    let asked = std::env::var("RUST_LOG").unwrap_or_default();
    for noisy in ["openraft", "sled"] {
        if !asked.contains(noisy) {
            if let Ok(d) = format!("{noisy}=off").parse() {
                filter = filter.add_directive(d);
            }
        }
    }
    // Colour only for a person at a terminal: a redirected stderr (a CI log, a file) gets plain
    // text, and NO_COLOR is honoured.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_target(false);
    let fmt = if format == "json" {
        fmt.json().with_filter(filter).boxed()
    } else {
        fmt.with_filter(filter).boxed()
    };
    let registry = tracing_subscriber::registry().with(fmt);
    #[cfg(feature = "otel")]
    if crate::otel::wanted() {
        match crate::otel::layer(service) {
            Ok((layer, provider)) => {
                registry.with(layer).init();
                return LogGuard {
                    traces: Some(provider),
                };
            }
            Err(e) => eprintln!("quorum: {e}; traces are not exported"),
        }
    }
    let _ = service;
    registry.init();
    LogGuard {
        #[cfg(feature = "otel")]
        traces: None,
    }
}

/// How this process is named in exported traces: `quorum-node-NAME` for a named node.
pub fn service_name(cli: &Cli) -> String {
    match &cli.command {
        Command::Node(n) => match &n.name {
            Some(name) => format!("quorum-node-{name}"),
            None => "quorum-node".into(),
        },
        _ => "quorum".into(),
    }
}
