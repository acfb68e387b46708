//! Entry point: parse the command line, set up logging, run the server.

use clap::Parser;
use instantstart::config::{Cli, Command, LogFormat};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let format = match &cli.command {
        Command::Serve(config) => config.log_format,
        Command::Probe { .. } | Command::Doctor { .. } => LogFormat::Text,
    };
    // Lines go to stdout from a writer thread of its own (none dropped: a full buffer waits),
    // flushed when `_flush` goes at the end of main. Colour codes only for a person at a
    // terminal: a log file or collector gets plain text. The queue holds 8,192 lines (the
    // default 128,000 slots cost 4 MiB of resident memory from the first line on).
    let (writer, _flush) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(8192)
        .lossy(false)
        .finish(std::io::stdout());
    let logs = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("INSTANTSTART_LOG")
                .unwrap_or_else(|_| "info,sqlx=warn".into()),
        );
    match format {
        // The request's span (its id, method and route) is on every line logged inside it.
        LogFormat::Json => logs
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .init(),
        LogFormat::Text => logs.init(),
    }
    match cli.command {
        Command::Serve(config) => instantstart::build_app(*config).await?.run().await,
        Command::Probe { bind } => instantstart::probe(bind).await,
        Command::Doctor { bind, token } => {
            instantstart::doctor(bind, token.as_ref().map(|t| t.0.as_str())).await
        }
    }
}
