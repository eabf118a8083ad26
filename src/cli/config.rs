//! `bootbench config`: where the config file is and what is in effect.
//! The file's format and the precedence are [`crate::settings`]'s.

use crate::settings::{config_path, Effective, Given, Settings};
use std::ffi::OsString;
use std::process::ExitCode;

/// Config subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print every value the config file can set, the value in effect, and
    /// where it came from: default, the config file, or the environment.
    Show {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print the config file's path ($BOOTBENCH_CONFIG, else
    /// $XDG_CONFIG_HOME/bootbench/config.toml, else
    /// ~/.config/bootbench/config.toml); it need not exist.
    Path,
}

/// The process's environment, as [`Settings`] reads it.
pub fn env(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// Runs a config subcommand.
pub fn run(cmd: &ConfigCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ConfigCommand::Path => println!("{}", config_path()?.display()),
        ConfigCommand::Show { json } => {
            let settings = Settings::load(&config_path()?)?;
            let effective = settings.effective(&Given::default(), env);
            if *json {
                println!("{}", serde_json::to_string_pretty(&show_json(&settings, &effective))?);
            } else {
                print!("{}", show_table(&settings, &effective));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The table of `config show`: the file, then one aligned row per key.
fn show_table(settings: &Settings, effective: &Effective) -> String {
    let found = if settings.found { "" } else { " (not found: built-in defaults)" };
    let mut out = format!("config file  {}{found}\n\n", settings.path.display());
    let rows: Vec<[String; 3]> = effective
        .rows()
        .into_iter()
        .map(|r| {
            let value = r.value.unwrap_or_else(|| format!("({})", r.unset));
            [r.key.to_string(), value, r.source.to_string()]
        })
        .collect();
    let header = ["KEY".to_string(), "VALUE".to_string(), "SOURCE".to_string()];
    let width = |i: usize| rows.iter().chain([&header]).map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (w0, w1) = (width(0), width(1));
    for r in std::iter::once(&header).chain(&rows) {
        out.push_str(&format!("{:<w0$}  {:<w1$}  {}\n", r[0], r[1], r[2]));
    }
    out
}

/// The JSON of `config show --json`.
fn show_json(settings: &Settings, effective: &Effective) -> serde_json::Value {
    use crate::settings::Source;
    let values: Vec<serde_json::Value> = effective
        .rows()
        .into_iter()
        .map(|r| {
            let from = match r.source {
                Source::File(p) => Some(p.display().to_string()),
                Source::Environment(name) => Some(name.to_string()),
                Source::Default | Source::Flag => None,
            };
            serde_json::json!({"key": r.key, "value": r.value, "source": r.source.kind(), "from": from})
        })
        .collect();
    serde_json::json!({"file": settings.path, "found": settings.found, "values": values})
}
