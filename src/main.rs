//! Entry point: parse the command line, set up logging, run the server.

use clap::Parser;
use instantstart::config::{Cli, Command};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("INSTANTSTART_LOG")
                .unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .init();
    match Cli::parse().command {
        Command::Serve(config) => instantstart::build_app(*config).await?.run().await,
        Command::Probe { bind } => instantstart::probe(bind).await,
    }
}
