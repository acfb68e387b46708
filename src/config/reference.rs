//! The configuration reference (`docs/configuration.md`), generated from the CLI definition so
//! the two cannot differ: a test compares the file with [`markdown`].

use clap::CommandFactory;

use super::Cli;

/// The reference page: every subcommand and each of its flags with its environment variable,
/// default, values and the flag's own help text.
pub fn markdown() -> String {
    let cli = Cli::command();
    let mut out = String::from(
        "# Configuration reference\n\n\
         Generated from the command line definition (`src/config/`); a test fails when the two \
         differ. Every flag is also an environment variable: a flag given on the command line \
         wins over its variable.\n",
    );
    for sub in cli.get_subcommands() {
        out.push_str(&format!("\n## `instantstart {}`\n\n", sub.get_name()));
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            out.push_str(&format!("{}\n", one_paragraph(&about.to_string())));
        }
        for arg in sub.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if long == "help" {
                continue;
            }
            out.push_str(&format!("\n### `--{long}`\n\n"));
            let mut facts = Vec::new();
            if let Some(env) = arg.get_env() {
                facts.push(format!("variable `{}`", env.to_string_lossy()));
            }
            let defaults: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|d| d.to_string_lossy().to_string())
                .filter(|d| !d.is_empty())
                .collect();
            if !defaults.is_empty() {
                facts.push(format!("default `{}`", defaults.join(",")));
            }
            let values: Vec<String> = arg
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| format!("`{}`", v.get_name()))
                .collect();
            if !values.is_empty() && arg.get_action().takes_values() {
                facts.push(format!("one of {}", values.join(", ")));
            }
            if !arg.get_action().takes_values() {
                facts.push("a switch".to_string());
            }
            out.push_str(&format!("{}\n\n", facts.join(" · ")));
            if let Some(help) = arg.get_long_help().or(arg.get_help()) {
                out.push_str(&format!("{}\n", one_paragraph(&help.to_string())));
            }
        }
    }
    out.push_str(
        "\n## Environment only\n\n### `INSTANTSTART_LOG`\n\ndefault `info,sqlx=warn`\n\n\
         The log filter, in `tracing`'s `EnvFilter` syntax (`debug`, `instantstart=debug,info`).\n",
    );
    out
}

/// Help text as one Markdown paragraph (clap keeps the doc comment's line breaks).
fn one_paragraph(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
