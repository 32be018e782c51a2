//! `[target] lava` and `run --lava …`: the LAVA lab a scenario's trials
//! run on, as the user gives it. Submitting to it is `xrunbench_lava`'s.

use std::path::PathBuf;

/// `--lava-token-file` is given.
pub const TOKEN_ENV: &str = "XRUNBENCH_LAVA_TOKEN";

/// `--lava` and its options, on `run`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LavaTargetArgs {
    /// Run the trials as jobs of this LAVA server (`https://lava.example/`).
    #[arg(long, value_name = "URL", requires = "lava_job")]
    pub lava: Option<String>,
    /// The lab's part of every job (YAML): `device_type`, `tags`,
    /// `context`, the `deploy` and `boot` actions; its boot's `prompts`
    /// are the shell prompt the trials are typed at.
    #[arg(long, value_name = "FILE", requires = "lava")]
    pub lava_job: Option<PathBuf>,
    /// How many jobs (devices) the trials are shared among, at once.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "lava")]
    pub lava_devices: usize,
    /// A file holding the API token (else $XRUNBENCH_LAVA_TOKEN).
    #[arg(long, value_name = "FILE", requires = "lava")]
    pub lava_token_file: Option<PathBuf>,
}

/// A LAVA server's `url` checked and split into (base ending in `/`,
/// origin); what is wrong with it in one line if not. A URL given down to
/// the API (`…/api/v0.2/`) is taken back to the server's.
pub fn lab_url(url: &str) -> Result<(String, String), String> {
    let bad = |reason: &str| reason.to_owned();
    let lower = url.to_ascii_lowercase();
    let scheme_len = if lower.starts_with("https://") {
        8
    } else if lower.starts_with("http://") {
        7
    } else {
        return Err(bad("expected http://HOST[:PORT]/ or https://HOST[:PORT]/"));
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("has blanks or control characters; expected a URL"));
    }
    if url.contains(['?', '#']) {
        return Err(bad("has a query or fragment; expected the server's URL"));
    }
    let rest = &url[scheme_len..];
    let host_end = rest.find('/').unwrap_or(rest.len());
    if host_end == 0 {
        return Err(bad("has no host; expected http(s)://HOST[:PORT]/"));
    }
    let origin = format!("{}{}", &lower[..scheme_len], &rest[..host_end]);
    let mut path = rest[host_end..].trim_end_matches('/').to_owned();
    if let Some(p) = path.strip_suffix("/api/v0.2") {
        path = p.to_owned();
    }
    Ok((format!("{origin}{path}/"), origin))
}

/// Whether `base_url` can be a server's address (http or https, a host,
/// nothing after its path); the reason in one line if not.
pub fn check_base_url(base_url: &str) -> Result<(), String> {
    lab_url(base_url.trim())
        .map(drop)
        .map_err(|reason| format!("LAVA server URL `{}`: {reason}", base_url.trim()))
}
