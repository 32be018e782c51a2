//! A small blocking client for a LAVA 2023.01 server's REST API (v0.2):
//! validate and submit a job, follow it to its end, cancel it, and read
//! its results back (test cases, JUnit) and the lab's devices.
//!
//! Facts of 2023.01 this client is written against (measured on a real
//! server, see the tests' reply literals):
//! - authentication is the header `Authorization: Token <secret>`; a
//!   wrong or missing token is a 403 with `{"detail": …}` (not a 401), and
//!   a wrong token fails even on public reads;
//! - cancelling is a GET of `jobs/ID/cancel/` (a POST is a 405);
//! - `jobs/ID/tests/` gives each case's suite as the suite's id, named by
//!   `jobs/ID/suites/`; both answer an empty page (not a 404) for a job
//!   that does not exist;
//! - `jobs/validate/` answers 200 with `{"message": "Job invalid: …"}` for
//!   a job it rejects, and an HTML 500 page for YAML it cannot parse; it
//!   does not check that the device type exists (submission does);
//! - list endpoints are paginated (`count`, `next`, `results`).
//!
//! A job's outcome is its `health` (Complete, Incomplete, Canceled), never
//! an exit code: LAVA has none.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Deserialize;
use xrunbench_schema::doc::one_line;

use xrunbench_scenario::lava::lab_url;

/// How long to wait for a TCP (and TLS) connection to the server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait for the server's answer, and then for its body.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest reply body read: JUnit of a long job is the biggest reply,
/// well under this; a bound keeps a broken server from filling memory.
const MAX_BODY: u64 = 64 << 20;
/// How much of an unexpected reply an error quotes.
const SNIPPET_CHARS: usize = 200;
/// How often a request in flight looks whether a stop was asked (SIGINT,
/// SIGTERM): a server that answers a byte at a time holds a stop no
/// longer than this.
const STOP_CHECK: Duration = Duration::from_millis(250);
/// The whole time a cancel may take: a cancel is what a stop does, so a
/// stop does not cut it short, and a slow server must not hold the stop.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(10);
/// The message `jobs/validate/` answers for a valid job.
const JOB_VALID: &str = "Job valid.";

/// What went wrong talking to a LAVA server: each one line that names the
/// URL and what was expected, and never the token.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The server URL given is not an http(s) URL.
    #[error("LAVA server URL `{url}`: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A token could not be read (file or environment variable).
    #[error("{source_name}: {reason}")]
    BadToken {
        /// Where the token was to come from (`token file X`, `$VAR`).
        source_name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No HTTP answer: connection refused, timed out, host not found, TLS.
    #[error("cannot reach the LAVA server at {url}: {reason}")]
    Unreachable {
        /// The URL requested.
        url: String,
        /// The transport's reason (the io error's text).
        reason: String,
    },
    /// 401/403: the token is wrong, missing, or its user may not do this.
    #[error("{url}: HTTP {status} ({detail}): {}", auth_hint(.token_sent))]
    Unauthorized {
        /// The URL requested.
        url: String,
        /// 401 or 403.
        status: u16,
        /// The server's `detail` (e.g. `Invalid token.`).
        detail: String,
        /// Whether a token was sent (to tell "wrong" from "missing").
        token_sent: bool,
    },
    /// The server refused the job definition (validation or submission).
    #[error("{url}: the server rejected the job: \"{message}\"")]
    Rejected {
        /// The URL requested.
        url: String,
        /// The server's message, verbatim (control characters escaped).
        message: String,
    },
    /// Any other HTTP status than the one expected.
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        /// The URL requested.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body (an HTML error page's headings instead).
        body: String,
    },
    /// A reply that is not the JSON (or XML) the endpoint sends.
    #[error("{url}: not a LAVA 2023.01 reply: expected {expected}")]
    BadReply {
        /// The URL requested.
        url: String,
        /// What was expected, and what was missing or wrong.
        expected: String,
    },
    /// A stop (SIGINT, SIGTERM) was asked while the request was in
    /// flight: it was given up, its connection closed.
    #[error("{url}: given up: a signal asked to stop")]
    Interrupted {
        /// The URL requested.
        url: String,
    },
    /// [`Server::wait`]'s deadline passed before the job finished.
    #[error("job {id}: not finished after {waited:.0?} (the deadline passed)")]
    TimedOut {
        /// The job.
        id: u64,
        /// How long it was waited for.
        waited: Duration,
    },
}

/// The advice of an [`ServerError::Unauthorized`]: a refused token and a
/// missing one are fixed differently.
fn auth_hint(token_sent: &bool) -> &'static str {
    if *token_sent {
        "the server refused the token given (wrong, or its user may not do this)"
    } else {
        "no token was given, and this needs one"
    }
}

/// A LAVA API token. It prints as `Token(***)`, so that no log, error or
/// `{:?}` of a [`Server`] shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A token from its secret; `source_name` says where it came from in
    /// the error (a token must be one non-empty word: it goes into an
    /// HTTP header).
    fn checked(secret: &str, source_name: String) -> Result<Token, ServerError> {
        let secret = secret.trim();
        let reason = if secret.is_empty() {
            "empty; expected a LAVA API token"
        } else if secret.chars().any(|c| c.is_whitespace() || c.is_control()) {
            "has blanks or control characters inside; expected one LAVA API token"
        } else {
            return Ok(Token(secret.to_owned()));
        };
        Err(ServerError::BadToken {
            source_name,
            reason: reason.to_owned(),
        })
    }

    /// A token given directly (e.g. by a test); trimmed.
    pub fn new(secret: &str) -> Result<Token, ServerError> {
        Token::checked(secret, "the token given".to_owned())
    }

    /// The trimmed contents of `path` (how tokens are kept out of command
    /// lines and shell history).
    pub fn from_file(path: &Path) -> Result<Token, ServerError> {
        let source_name = format!("token file {}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| ServerError::BadToken {
            source_name: source_name.clone(),
            reason: format!("cannot read it ({e}); expected a file holding a LAVA API token"),
        })?;
        Token::checked(&text, source_name)
    }

    /// The trimmed value of the environment variable `var` (how CI hands
    /// secrets over).
    pub fn from_env(var: &str) -> Result<Token, ServerError> {
        let source_name = format!("environment variable {var}");
        let value = std::env::var(var).map_err(|e| ServerError::BadToken {
            source_name: source_name.clone(),
            reason: format!("{e}; expected it to hold a LAVA API token"),
        })?;
        Token::checked(&value, source_name)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

/// A job's state as the server gives it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub enum JobState {
    /// Submitted, not yet scheduled.
    Submitted,
    /// Being scheduled (multinode).
    Scheduling,
    /// Given a device, not yet started.
    Scheduled,
    /// Running on its device.
    Running,
    /// Cancel requested, not yet stopped.
    Canceling,
    /// Over: its [`JobHealth`] says how it went.
    Finished,
    /// A state this client does not know (a newer server's).
    Other(String),
}

impl From<String> for JobState {
    fn from(s: String) -> Self {
        match s.as_str() {
            "Submitted" => JobState::Submitted,
            "Scheduling" => JobState::Scheduling,
            "Scheduled" => JobState::Scheduled,
            "Running" => JobState::Running,
            "Canceling" => JobState::Canceling,
            "Finished" => JobState::Finished,
            _ => JobState::Other(s),
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobState::Other(s) => f.write_str(&one_line(s)),
            known => write!(f, "{known:?}"),
        }
    }
}

/// A job's health: its outcome once [`JobState::Finished`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub enum JobHealth {
    /// Not finished yet.
    Unknown,
    /// Ran to its end (its test cases may still have failed).
    Complete,
    /// Failed on the way (infrastructure, boot, timeout).
    Incomplete,
    /// Cancelled.
    Canceled,
    /// A health this client does not know (a newer server's).
    Other(String),
}

impl From<String> for JobHealth {
    fn from(s: String) -> Self {
        match s.as_str() {
            "Unknown" => JobHealth::Unknown,
            "Complete" => JobHealth::Complete,
            "Incomplete" => JobHealth::Incomplete,
            "Canceled" => JobHealth::Canceled,
            _ => JobHealth::Other(s),
        }
    }
}

impl fmt::Display for JobHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobHealth::Other(s) => f.write_str(&one_line(s)),
            known => write!(f, "{known:?}"),
        }
    }
}

/// A job, as `GET jobs/ID/` gives it (the fields this harness reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Job {
    /// Its id.
    pub id: u64,
    /// Where it is in its life.
    pub state: JobState,
    /// How it went (meaningful once finished).
    pub health: JobHealth,
    /// The device it was given, once scheduled.
    pub actual_device: Option<String>,
    /// When it was submitted (ISO 8601, UTC).
    pub submit_time: Option<String>,
    /// When it started.
    pub start_time: Option<String>,
    /// When it ended.
    pub end_time: Option<String>,
}

/// One test case of a job's results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCase {
    /// Its suite's name: `lava` for LAVA's own actions, `N_NAME` for the
    /// job's test definitions (`0_xrunbench-quick`).
    pub suite: String,
    /// The case's name.
    pub name: String,
    /// `pass`, `fail`, `skip` or `unknown`.
    pub result: String,
}

/// A device of the lab, as `GET devices/` gives it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Device {
    /// Its name (`qemu01`).
    pub hostname: String,
    /// Its device type (`qemu`).
    pub device_type: String,
    /// `Idle`, `Reserved`, `Running`.
    pub state: String,
    /// `Good`, `Unknown`, `Bad`, `Maintenance`, `Retired`, `Looping`.
    pub health: String,
    /// The worker it is attached to, if any.
    pub worker_host: Option<String>,
}

/// One page of a paginated list.
#[derive(Deserialize)]
struct Page<T> {
    next: Option<String>,
    results: Vec<T>,
}

/// A test case as `jobs/ID/tests/` gives it: the suite is its id (a
/// name is accepted too, should a server give one).
#[derive(Deserialize)]
struct RawTest {
    name: String,
    result: String,
    suite: serde_json::Value,
}

/// A suite as `jobs/ID/suites/` gives it.
#[derive(Deserialize)]
struct RawSuite {
    id: u64,
    name: String,
}

/// `{"message": …}`: validation, submission errors, cancel.
#[derive(Deserialize)]
struct Message {
    message: String,
}

/// `{"job_ids": […]}`: a submission.
#[derive(Deserialize)]
struct Submitted {
    job_ids: Vec<u64>,
}

/// `{"detail": …}`: Django REST framework's errors (403, 404).
#[derive(Deserialize)]
struct Detail {
    detail: String,
}

/// An HTTP answer, read whole.
struct Reply {
    url: String,
    status: u16,
    body: String,
    location: Option<String>,
}

/// Whether a stop was asked: what a request in flight looks at.
type StopAsked = Arc<dyn Fn() -> bool + Send + Sync>;

/// A LAVA server: its URL, the HTTP configuration (timeouts), the token,
/// and what says a stop was asked.
pub struct Server {
    /// `scheme://host[:port]/[prefix/]`, always ending in `/`.
    base: String,
    /// `scheme://host[:port]`: where pagination links are sent (see
    /// [`Server::follow`]).
    origin: String,
    /// Each request gets an agent of its own from it, so that giving one
    /// up (closing its connection) touches no other.
    config: ureq::config::Config,
    token: Option<Token>,
    stop: StopAsked,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("base", &self.base)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// `url` checked and split into (base ending in `/`, origin).
fn parse_base(url: &str) -> Result<(String, String), ServerError> {
    lab_url(url).map_err(|reason| ServerError::BadUrl {
        url: url.to_owned(),
        reason,
    })
}

/// `s` percent-encoded for a query value (device type names are plain
/// words, but a user may type anything).
fn query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What an error quotes of a body: one line, at most [`SNIPPET_CHARS`].
/// Django's HTML error pages start with 3 kB of markup, so their headings
/// (`500 Internal Server Error: TestJob matching query does not exist.`)
/// are quoted instead.
fn snippet(body: &str) -> String {
    let text = if body.trim_start().starts_with('<') {
        let headings: Vec<String> = ["h1", "h2"]
            .iter()
            .filter_map(|tag| element_text(body, tag))
            .collect();
        if headings.is_empty() {
            element_text(body, "title").unwrap_or_else(|| body.to_owned())
        } else {
            headings.join(": ")
        }
    } else {
        body.to_owned()
    };
    let text = one_line(&text.split_whitespace().collect::<Vec<_>>().join(" "));
    match text.char_indices().nth(SNIPPET_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None if text.is_empty() => "(empty body)".to_owned(),
        None => text,
    }
}

/// The text of the first `<tag>` of an HTML page, if not blank.
fn element_text(html: &str, tag: &str) -> Option<String> {
    let start = html.find(&format!("<{tag}>"))? + tag.len() + 2;
    let len = html[start..].find(&format!("</{tag}>"))?;
    let text = html[start..start + len].trim();
    (!text.is_empty()).then(|| unescape_html(text))
}

/// The entities Django's templates escape, back to their characters (a
/// YAML error quotes `"<unicode string>"`).
fn unescape_html(text: &str) -> String {
    [
        ("&quot;", "\""),
        ("&#x27;", "'"),
        ("&#39;", "'"),
        ("&lt;", "<"),
        ("&gt;", ">"),
        ("&amp;", "&"),
    ]
    .iter()
    .fold(text.to_owned(), |t, (entity, c)| t.replace(entity, c))
}

/// A ureq error as the reason of [`ServerError::Unreachable`]: the io
/// error's own text (`Connection refused (os error 111)`) where there is
/// one.
fn transport_error(url: &str, e: ureq::Error) -> ServerError {
    let reason = match e {
        ureq::Error::Io(io) => io.to_string(),
        ureq::Error::Timeout(t) => format!("timed out ({t})"),
        other => other.to_string(),
    };
    ServerError::Unreachable {
        url: url.to_owned(),
        reason,
    }
}

/// `reply`'s body parsed as `T`; else a [`ServerError::BadReply`] naming
/// what was expected and serde's reason (the missing field).
fn parse<T: DeserializeOwned>(reply: &Reply, expected: &str) -> Result<T, ServerError> {
    // Within the byte bound a reply can still be millions of values:
    // counted before serde builds them, as every document from outside.
    let limits = xrunbench_schema::bounded::Limits::DOCUMENT.with_bytes(MAX_BODY as usize);
    xrunbench_schema::bounded::scan_json(reply.body.as_bytes(), &limits).map_err(|e| {
        ServerError::BadReply {
            url: reply.url.clone(),
            expected: format!("{expected} ({e})"),
        }
    })?;
    serde_json::from_str(&reply.body).map_err(|e| ServerError::BadReply {
        url: reply.url.clone(),
        expected: format!("{expected} ({})", one_line(&e.to_string())),
    })
}

/// `reply` if its status is a success; else the error its status means.
fn success(reply: Reply, token_sent: bool) -> Result<Reply, ServerError> {
    match reply.status {
        200..=299 => Ok(reply),
        401 | 403 => Err(ServerError::Unauthorized {
            detail: serde_json::from_str::<Detail>(&reply.body)
                .map_or_else(|_| snippet(&reply.body), |d| one_line(&d.detail)),
            url: reply.url,
            status: reply.status,
            token_sent,
        }),
        // Redirects are not followed: ureq would drop the token on the
        // way (rightly), and the refusal would then be a puzzle.
        300..=399 => Err(ServerError::Status {
            body: format!(
                "redirected to {}; give the server's URL as that (https?)",
                reply.location.as_deref().unwrap_or("(no Location)")
            ),
            url: reply.url,
            status: reply.status,
        }),
        _ => Err(ServerError::Status {
            body: snippet(&reply.body),
            url: reply.url,
            status: reply.status,
        }),
    }
}

/// A `jobs/validate/` reply: anything but `Job valid.` is a rejection.
fn validate_reply(reply: Reply, token_sent: bool) -> Result<(), ServerError> {
    let reply = success(reply, token_sent)?;
    let m: Message = parse(&reply, "a JSON object with `message`")?;
    if m.message == JOB_VALID {
        Ok(())
    } else {
        Err(ServerError::Rejected {
            url: reply.url,
            message: one_line(&m.message),
        })
    }
}

/// A `jobs/` submission reply: a 400 with a message is a rejection.
fn submit_reply(reply: Reply, token_sent: bool) -> Result<Vec<u64>, ServerError> {
    if reply.status == 400 {
        if let Ok(m) = serde_json::from_str::<Message>(&reply.body) {
            return Err(ServerError::Rejected {
                url: reply.url,
                message: one_line(&m.message),
            });
        }
    }
    let reply = success(reply, token_sent)?;
    let s: Submitted = parse(&reply, "a JSON object with `job_ids`")?;
    if s.job_ids.is_empty() {
        return Err(ServerError::BadReply {
            url: reply.url,
            expected: "at least one id in `job_ids` (it was empty)".to_owned(),
        });
    }
    Ok(s.job_ids)
}

/// Test cases with their suites named: `suites` maps the ids the tests
/// give to names; `suites_url` is where a missing id was looked for.
fn name_suites(
    raw: Vec<RawTest>,
    suites: &HashMap<u64, String>,
    tests_url: &str,
    suites_url: &str,
) -> Result<Vec<TestCase>, ServerError> {
    raw.into_iter()
        .map(|t| {
            let suite = match &t.suite {
                serde_json::Value::String(name) => name.clone(),
                serde_json::Value::Number(n) => n
                    .as_u64()
                    .and_then(|id| suites.get(&id))
                    .cloned()
                    .ok_or_else(|| ServerError::BadReply {
                        url: suites_url.to_owned(),
                        expected: format!(
                            "suite {n} (of test case `{}`) listed",
                            one_line(&t.name)
                        ),
                    })?,
                _ => {
                    return Err(ServerError::BadReply {
                        url: tests_url.to_owned(),
                        expected: format!(
                            "test case `{}`'s suite as an id or a name",
                            one_line(&t.name)
                        ),
                    })
                }
            };
            Ok(TestCase {
                suite,
                name: t.name,
                result: t.result,
            })
        })
        .collect()
}

/// Every reading this client makes of a reply, made of one reply
/// (`status`, `body`) with no network: the `lava_reply` fuzz target's
/// entry. Each is named (`job`, `tests`, `devices`, `next`, …) with what
/// it read, as shown to a person, or its error; `next` is where a page's
/// `next` link would be followed, from a client of `https://lava.test/`.
pub fn readings(status: u16, body: &str) -> Vec<(&'static str, Result<String, ServerError>)> {
    let reply = || Reply {
        url: "https://lava.test/api/v0.2/x/".to_owned(),
        status,
        body: body.to_owned(),
        location: None,
    };
    let ok = || success(reply(), true);
    let suites = || -> Result<HashMap<u64, String>, ServerError> {
        let page: Page<RawSuite> = parse(&ok()?, "suites")?;
        Ok(page.results.into_iter().map(|s| (s.id, s.name)).collect())
    };
    let job = ok().and_then(|r| parse::<Job>(&r, "a job")).map(|j| {
        let device = j.actual_device.as_deref().map(one_line).unwrap_or_default();
        format!("job {}: {} on {device}: {}", j.id, j.state, j.health)
    });
    let tests = ok()
        .and_then(|r| parse::<Page<RawTest>>(&r, "test cases"))
        .and_then(|p| name_suites(p.results, &suites().unwrap_or_default(), "t", "s"))
        .map(|cases| {
            let shown: Vec<String> = cases
                .iter()
                .map(|c| one_line(&format!("{}/{}: {}", c.suite, c.name, c.result)))
                .collect();
            shown.join(" ")
        });
    let devices = ok()
        .and_then(|r| parse::<Page<Device>>(&r, "devices"))
        .map(|p| {
            let names: Vec<String> = p.results.iter().map(|d| one_line(&d.hostname)).collect();
            names.join(" ")
        });
    let next = ok()
        .and_then(|r| parse::<Page<serde_json::Value>>(&r, "a page"))
        .and_then(|p| {
            let server = Server::new("https://lava.test/", None)?;
            match p.next {
                Some(n) => server.next_page(&n, "https://lava.test/api/v0.2/x/"),
                None => Ok(String::new()),
            }
        });
    let cancel = ok()
        .and_then(|r| parse::<Message>(&r, "a JSON object with `message`"))
        .map(|m| one_line(&m.message));
    vec![
        ("job", job),
        ("tests", tests),
        ("suites", suites().map(|s| s.len().to_string())),
        ("devices", devices),
        ("next", next),
        (
            "validate",
            validate_reply(reply(), true).map(|()| String::new()),
        ),
        (
            "submit",
            submit_reply(reply(), true).map(|ids| format!("{ids:?}")),
        ),
        ("cancel", cancel),
    ]
}

impl Server {
    /// A client of the server at `base_url` (`https://lava.example.org/`;
    /// a trailing slash or `api/v0.2/` may be given or not). `token` is
    /// needed to submit and cancel; reading public jobs needs none.
    pub fn new(base_url: &str, token: Option<Token>) -> Result<Server, ServerError> {
        let (base, origin) = parse_base(base_url.trim())?;
        let config = ureq::Agent::config_builder()
            .timeout_resolve(Some(CONNECT_TIMEOUT))
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_send_request(Some(READ_TIMEOUT))
            .timeout_send_body(Some(READ_TIMEOUT))
            .timeout_recv_response(Some(READ_TIMEOUT))
            .timeout_recv_body(Some(READ_TIMEOUT))
            // Statuses are this client's to explain (403: the token).
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            // A fresh connection a request: a LAVA server's gunicorn
            // closes an idle one after 2 s (its keep-alive), and a poll
            // every 2 s would meet the closed one now and then (reset by
            // peer) on a request that did nothing wrong.
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .user_agent(concat!("xrunbench/", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Server {
            base,
            origin,
            config,
            token,
            stop: Arc::new(|| xrunbench_lab::signals::stop_requested().is_some()),
        })
    }

    /// This client with `stop` as what says a stop was asked, instead of
    /// SIGINT and SIGTERM (a test's flag).
    pub fn stopped_by(mut self, stop: impl Fn() -> bool + Send + Sync + 'static) -> Server {
        self.stop = Arc::new(stop);
        self
    }

    /// The server's URL, as requests are built from it (ends in `/`).
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The URL of an API path (`jobs/5/`).
    fn api(&self, path: &str) -> String {
        format!("{}api/v0.2/{path}", self.base)
    }

    /// A pagination link made to point at this server: the path and query
    /// are the server's, the scheme and host the user's. Behind a TLS
    /// proxy Django writes `http://` links; and the token is never sent
    /// to a host the user did not name.
    fn follow(&self, next: &str) -> String {
        let path = match next.find("://") {
            Some(i) => next[i + 3..].find('/').map_or("/", |j| &next[i + 3 + j..]),
            None => next,
        };
        format!("{}/{}", self.origin, path.trim_start_matches('/'))
    }

    /// Where a page's `next` link leads (see [`Server::follow`]), if it
    /// can be a URL: one with blanks or hidden characters would be quoted
    /// in the request's error, on more than one line.
    fn next_page(&self, next: &str, url: &str) -> Result<String, ServerError> {
        if next
            .chars()
            .any(|c| c.is_whitespace() || xrunbench_schema::doc::is_hidden(c))
        {
            return Err(ServerError::BadReply {
                url: url.to_owned(),
                expected: format!("`next` as a URL, got `{}`", one_line(next)),
            });
        }
        Ok(self.follow(next))
    }

    /// A reply read whole, or why there is none.
    fn read(
        url: &str,
        res: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Reply, ServerError> {
        let mut resp = res.map_err(|e| transport_error(url, e))?;
        let status = resp.status().as_u16();
        let location = resp
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .map_err(|e| transport_error(url, e))?;
        Ok(Reply {
            url: url.to_owned(),
            status,
            body,
            location,
        })
    }

    /// The `Authorization` header's value, if there is a token.
    fn authorization(&self) -> Option<String> {
        self.token.as_ref().map(|t| format!("Token {}", t.0))
    }

    /// The reply to the request `send` makes with a fresh agent, read on a
    /// thread of its own while this one looks for a stop every
    /// [`STOP_CHECK`]: ureq's timeouts bound a phase, not a read, so a
    /// server sending a byte now and then would hold a stop for a whole
    /// timeout. On a stop the agent is shut down (its socket closed, the
    /// thread's read fails at once) and [`ServerError::Interrupted`]
    /// returned. With `stoppable` false (a cancel, which is what a stop
    /// does) no stop cuts it short.
    fn exchange(
        &self,
        url: &str,
        stoppable: bool,
        send: impl FnOnce(&ureq::Agent) -> Result<ureq::http::Response<ureq::Body>, ureq::Error>
            + Send
            + 'static,
    ) -> Result<Reply, ServerError> {
        let agent = ureq::Agent::new_with_config(self.config.clone());
        let (tx, rx) = mpsc::channel();
        let worker = agent.clone();
        let owned = url.to_owned();
        std::thread::spawn(move || {
            let _ = tx.send(Server::read(&owned, send(&worker)));
        });
        loop {
            match rx.recv_timeout(STOP_CHECK) {
                Ok(reply) => return reply,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(ServerError::Unreachable {
                        url: url.to_owned(),
                        reason: "the request ended without an answer".to_owned(),
                    })
                }
                Err(RecvTimeoutError::Timeout) if stoppable && (self.stop)() => {
                    agent.shutdown();
                    return Err(ServerError::Interrupted {
                        url: url.to_owned(),
                    });
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// GET `url`; a stop gives it up.
    fn get(&self, url: &str) -> Result<Reply, ServerError> {
        let auth = self.authorization();
        let owned = url.to_owned();
        self.exchange(url, true, move |agent| {
            let mut req = agent.get(&owned).header("Accept", "application/json");
            if let Some(auth) = auth {
                req = req.header("Authorization", auth);
            }
            req.call()
        })
    }

    /// POST `body` as JSON to `url`; a stop gives it up.
    fn post_json(&self, url: &str, body: &serde_json::Value) -> Result<Reply, ServerError> {
        let auth = self.authorization();
        let owned = url.to_owned();
        let body = body.to_string();
        self.exchange(url, true, move |agent| {
            let mut req = agent
                .post(&owned)
                .header("Accept", "application/json")
                .header("Content-Type", "application/json");
            if let Some(auth) = auth {
                req = req.header("Authorization", auth);
            }
            req.send(body.as_str())
        })
    }

    /// Every item of a paginated list, following `next`.
    fn pages<T: DeserializeOwned>(&self, first: String, what: &str) -> Result<Vec<T>, ServerError> {
        let mut out = Vec::new();
        let mut url = first;
        loop {
            let reply = success(self.get(&url)?, self.token.is_some())?;
            let page: Page<T> = parse(&reply, &format!("a page of {what} (`results`, `next`)"))?;
            out.extend(page.results);
            let Some(next) = page.next else {
                return Ok(out);
            };
            let next = self.next_page(&next, &url)?;
            if next == url {
                return Err(ServerError::BadReply {
                    url,
                    expected: "`next` to lead to another page (it is this page)".to_owned(),
                });
            }
            url = next;
        }
    }

    /// Checks a job definition (YAML) without submitting it. The server's
    /// validation checks the schema only: an unknown device type passes
    /// here and is rejected by [`Server::submit`].
    pub fn validate(&self, definition: &str) -> Result<(), ServerError> {
        let url = self.api("jobs/validate/");
        let reply = self.post_json(&url, &serde_json::json!({ "definition": definition }))?;
        validate_reply(reply, self.token.is_some())
    }

    /// Submits a job definition (YAML): the new jobs' ids (one, or one per
    /// role of a multinode job).
    pub fn submit(&self, definition: &str) -> Result<Vec<u64>, ServerError> {
        let url = self.api("jobs/");
        let reply = self.post_json(&url, &serde_json::json!({ "definition": definition }))?;
        submit_reply(reply, self.token.is_some())
    }

    /// The job `id` now.
    pub fn job(&self, id: u64) -> Result<Job, ServerError> {
        let url = self.api(&format!("jobs/{id}/"));
        let reply = success(self.get(&url)?, self.token.is_some())?;
        parse(&reply, "a job (`id`, `state`, `health`, …)")
    }

    /// Asks the server to cancel job `id` (a GET in 2023.01). The job goes
    /// through Canceling to Finished/Canceled; cancelling a finished job
    /// is accepted and changes nothing.
    pub fn cancel(&self, id: u64) -> Result<(), ServerError> {
        let url = self.api(&format!("jobs/{id}/cancel/"));
        let auth = self.authorization();
        let owned = url.clone();
        let reply = self.exchange(&url, false, move |agent| {
            let mut req = agent
                .get(&owned)
                .config()
                .timeout_global(Some(CANCEL_TIMEOUT))
                .build()
                .header("Accept", "application/json");
            if let Some(auth) = auth {
                req = req.header("Authorization", auth);
            }
            req.call()
        })?;
        let reply = success(reply, self.token.is_some())?;
        parse::<Message>(&reply, "a JSON object with `message`").map(|_| ())
    }

    /// Job `id`'s test cases, in the server's order, with their suites
    /// named. The job is read first: the server answers an empty list,
    /// not a 404, for a job that does not exist.
    pub fn tests(&self, id: u64) -> Result<Vec<TestCase>, ServerError> {
        self.job(id)?;
        let tests_url = self.api(&format!("jobs/{id}/tests/"));
        let raw: Vec<RawTest> = self.pages(tests_url.clone(), "test cases")?;
        // Read after the tests, so that a suite a running job adds in
        // between is listed.
        let suites_url = self.api(&format!("jobs/{id}/suites/"));
        let names: HashMap<u64, String> = if raw.iter().any(|t| t.suite.is_number()) {
            self.pages::<RawSuite>(suites_url.clone(), "test suites")?
                .into_iter()
                .map(|s| (s.id, s.name))
                .collect()
        } else {
            HashMap::new()
        };
        name_suites(raw, &names, &tests_url, &suites_url)
    }

    /// Job `id`'s results as JUnit XML (one `testsuite` per suite).
    pub fn junit(&self, id: u64) -> Result<String, ServerError> {
        let url = self.api(&format!("jobs/{id}/junit/"));
        let reply = success(self.get(&url)?, self.token.is_some())?;
        if !reply.body.trim_start().starts_with('<') {
            return Err(ServerError::BadReply {
                url,
                expected: format!("JUnit XML, got `{}`", snippet(&reply.body)),
            });
        }
        Ok(reply.body)
    }

    /// Job `id`'s log as the server keeps it: YAML, one
    /// `- {"dt": …, "lvl": …, "msg": …}` line per entry (what
    /// [`super::results::parse_log`] reads).
    pub fn log(&self, id: u64) -> Result<String, ServerError> {
        let url = self.api(&format!("jobs/{id}/logs/"));
        let reply = success(self.get(&url)?, self.token.is_some())?;
        Ok(reply.body)
    }

    /// The lab's devices, of `device_type` only if given (an unknown type
    /// is a 400 from the server).
    pub fn devices(&self, device_type: Option<&str>) -> Result<Vec<Device>, ServerError> {
        let url = match device_type {
            Some(t) => self.api(&format!("devices/?device_type={}", query_value(t))),
            None => self.api("devices/"),
        };
        self.pages(url, "devices")
    }

    /// Polls job `id` every `poll` until it is Finished, and returns it
    /// (its outcome is its `health`). `progress` sees the job first and
    /// on every change of its state or device. Past `deadline`: a
    /// [`ServerError::TimedOut`] (the job is left running; cancel it if
    /// it should not be).
    pub fn wait(
        &self,
        id: u64,
        poll: Duration,
        deadline: Instant,
        mut progress: impl FnMut(&Job),
    ) -> Result<Job, ServerError> {
        let started = Instant::now();
        let mut seen: Option<(JobState, Option<String>)> = None;
        loop {
            let job = self.job(id)?;
            let now = (job.state.clone(), job.actual_device.clone());
            if seen.as_ref() != Some(&now) {
                progress(&job);
                seen = Some(now);
            }
            if job.state == JobState::Finished {
                return Ok(job);
            }
            let t = Instant::now();
            if t >= deadline {
                return Err(ServerError::TimedOut {
                    id,
                    waited: t - started,
                });
            }
            let wake = t + poll.min(deadline - t);
            while Instant::now() < wake {
                if (self.stop)() {
                    return Err(ServerError::Interrupted {
                        url: self.api(&format!("jobs/{id}/")),
                    });
                }
                std::thread::sleep(STOP_CHECK.min(wake.saturating_duration_since(Instant::now())));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;

    // Replies of a real LAVA 2023.01 server (the scratch lab of
    // docs' issue 28), verbatim but for the jobs' definitions (shortened)
    // and their per-job tokens (blanked).
    const JOB_5: &str = r#"{"id":5,"submitter":"admin","viewing_groups":[],"description":"xrunbench busybox smoke","health_check":false,"requested_device_type":"qemu","tags":[],"actual_device":"qemu01","submit_time":"2026-12-05T20:39:20.347499Z","start_time":"2026-12-05T20:39:55.359157Z","end_time":"2026-12-05T20:40:15.290173Z","state":"Finished","health":"Complete","priority":50,"definition":"actions: []\n","original_definition":"actions: []\n","multinode_definition":"","failure_tags":[],"failure_comment":null,"token":""}"#;
    const TESTS_PAGE_1: &str = r#"{"count":9,"next":"http://127.0.0.1:18080/api/v0.2/jobs/5/tests/?limit=1&offset=8","previous":"http://127.0.0.1:18080/api/v0.2/jobs/5/tests/?limit=1&offset=6","results":[{"id":30,"result":"pass","resource_uri":"http://127.0.0.1:18080/api/v0.2/jobs/5/suites/4/tests/30/","unit":"","name":"job","measurement":null,"metadata":"case: job\ndefinition: lava\nresult: pass\n","start_log_line":null,"end_log_line":null,"logged":"2026-12-05T20:40:03.115317Z","suite":4,"test_set":null}]}"#;
    const TESTS_PAGE_2: &str = r#"{"count":9,"next":null,"previous":"http://127.0.0.1:18080/api/v0.2/jobs/5/tests/?limit=2&offset=6","results":[{"id":28,"result":"pass","resource_uri":"http://127.0.0.1:18080/api/v0.2/jobs/5/suites/5/tests/28/","unit":"","name":"echo","measurement":null,"metadata":"case: echo\ndefinition: 0_smoke\nduration: '0.13'\nresult: pass\n","start_log_line":null,"end_log_line":null,"logged":"2026-12-05T20:40:03.115301Z","suite":5,"test_set":null}]}"#;
    const SUITES_5: &str = r#"{"count":2,"next":null,"previous":null,"results":[{"id":4,"resource_uri":"http://127.0.0.1:18080/api/v0.2/jobs/5/suites/4/","name":"lava","job":5},{"id":5,"resource_uri":"http://127.0.0.1:18080/api/v0.2/jobs/5/suites/5/","name":"0_smoke","job":5}]}"#;
    const DEVICES: &str = r#"{"count":1,"next":null,"previous":null,"results":[{"hostname":"qemu01","device_type":"qemu","device_version":null,"physical_owner":null,"physical_group":null,"description":null,"tags":[],"state":"Idle","health":"Unknown","last_health_report_job":null,"worker_host":"w1","is_synced":false}]}"#;
    const INVALID_TOKEN: &str = r#"{"detail":"Invalid token."}"#;
    const NO_TOKEN: &str = r#"{"detail":"Authentication credentials were not provided."}"#;
    const SUBMIT_REJECTED: &str = r#"{"message":"Problem with submitted job data: Loading job submission failed: while parsing a flow node\ndid not find expected node content\n  in \"<unicode string>\", line 2, column 1."}"#;
    const SUBMIT_NO_DEVICE: &str =
        r#"{"message":"Devices unavailable: Device type 'nope' is unavailable."}"#;
    /// The 500 page of `jobs/999/cancel/` (3 kB of navigation cut).
    const HTML_500: &str = "<!DOCTYPE html>\n<html lang=\"en-us\">\n<head>\n  <meta charset=\"utf-8\">\n  <title> | HTTP 500 </title>\n</head>\n<body>\n<div class=\"container\">\n<h1>500 Internal Server Error</h1>\n<h2>TestJob matching query does not exist.</h2>\n<h3></h3>\n<p>\n  Oops, something has gone wrong!\n</p>\n</div>\n</body>\n</html>\n";

    fn reply(status: u16, body: &str) -> Reply {
        Reply {
            url: "http://lava.test/api/v0.2/jobs/".to_owned(),
            status,
            body: body.to_owned(),
            location: None,
        }
    }

    #[test]
    fn a_real_job_reply_parses() {
        let job: Job = parse(&reply(200, JOB_5), "a job").expect("job 5");
        assert_eq!(job.id, 5);
        assert_eq!(job.state, JobState::Finished);
        assert_eq!(job.health, JobHealth::Complete);
        assert_eq!(job.actual_device.as_deref(), Some("qemu01"));
        assert_eq!(job.end_time.as_deref(), Some("2026-12-05T20:40:15.290173Z"));
    }

    #[test]
    fn unknown_states_and_healths_are_kept_and_printed_as_given() {
        let body = r#"{"id":7,"state":"Paused","health":"Weird","actual_device":null}"#;
        let job: Job = parse(&reply(200, body), "a job").expect("job");
        assert_eq!(job.state, JobState::Other("Paused".into()));
        assert_eq!(job.health.to_string(), "Weird");
        assert_eq!(JobState::Canceling.to_string(), "Canceling");
        assert_eq!(job.submit_time, None);
    }

    #[test]
    fn a_reply_without_a_field_names_the_url_and_the_field() {
        let e = parse::<Job>(&reply(200, r#"{"id":5,"health":"Complete"}"#), "a job").unwrap_err();
        let line = e.to_string();
        assert!(line.contains("http://lava.test/api/v0.2/jobs/"), "{line}");
        assert!(line.contains("missing field `state`"), "{line}");
        let e = submit_reply(reply(201, r#"{"ids":[1]}"#), true).unwrap_err();
        assert!(e.to_string().contains("`job_ids`"), "{e}");
    }

    #[test]
    fn validation_and_submission_rejections_quote_the_server() {
        assert!(validate_reply(reply(200, r#"{"message":"Job valid."}"#), false).is_ok());
        let e = validate_reply(
            reply(
                200,
                r#"{"message":"Job invalid: required key not provided"}"#,
            ),
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "http://lava.test/api/v0.2/jobs/: the server rejected the job: \
             \"Job invalid: required key not provided\""
        );
        let e = submit_reply(reply(400, SUBMIT_REJECTED), true).unwrap_err();
        let line = e.to_string();
        assert!(!line.contains('\n'), "{line}");
        assert!(
            line.contains("while parsing a flow node\\ndid not find expected node content"),
            "{line}"
        );
        let e = submit_reply(reply(400, SUBMIT_NO_DEVICE), true).unwrap_err();
        assert!(e.to_string().ends_with(
            "rejected the job: \"Devices unavailable: Device type 'nope' is unavailable.\""
        ));
        assert_eq!(
            submit_reply(reply(201, r#"{"job_ids":[6]}"#), true).expect("ids"),
            vec![6]
        );
    }

    #[test]
    fn a_refused_or_missing_token_is_said_so() {
        let e = success(reply(403, INVALID_TOKEN), true).err().expect("403");
        assert_eq!(
            e.to_string(),
            "http://lava.test/api/v0.2/jobs/: HTTP 403 (Invalid token.): the server \
             refused the token given (wrong, or its user may not do this)"
        );
        let e = success(reply(403, NO_TOKEN), false).err().expect("403");
        assert!(e
            .to_string()
            .ends_with("no token was given, and this needs one"));
    }

    #[test]
    fn other_statuses_quote_one_line_of_the_body() {
        let e = success(reply(500, HTML_500), true).err().expect("500");
        assert_eq!(
            e.to_string(),
            "http://lava.test/api/v0.2/jobs/: HTTP 500: 500 Internal Server Error: \
             TestJob matching query does not exist."
        );
        let page = "<html><h1>500 Internal Server Error</h1>\n<h2>in &quot;&lt;unicode string&gt;&quot;, line 2</h2>";
        assert_eq!(
            snippet(page),
            "500 Internal Server Error: in \"<unicode string>\", line 2"
        );
        let long = "x".repeat(500);
        let e = success(reply(502, &long), true).err().expect("502");
        assert!(e.to_string().ends_with(&format!("{}…", "x".repeat(200))));
        let mut moved = reply(301, "");
        moved.location = Some("https://lava.test/api/v0.2/jobs/".into());
        let e = success(moved, true).err().expect("301");
        assert!(
            e.to_string().contains("redirected to https://lava.test/"),
            "{e}"
        );
    }

    #[test]
    fn test_cases_get_their_suites_names() {
        let mut raw: Vec<RawTest> = parse::<Page<RawTest>>(&reply(200, TESTS_PAGE_1), "p")
            .expect("page 1")
            .results;
        raw.extend(
            parse::<Page<RawTest>>(&reply(200, TESTS_PAGE_2), "p")
                .expect("page 2")
                .results,
        );
        let suites: HashMap<u64, String> = parse::<Page<RawSuite>>(&reply(200, SUITES_5), "s")
            .expect("suites")
            .results
            .into_iter()
            .map(|s| (s.id, s.name))
            .collect();
        let cases = name_suites(raw, &suites, "T", "S").expect("named");
        let got: Vec<(&str, &str, &str)> = cases
            .iter()
            .map(|c| (c.suite.as_str(), c.name.as_str(), c.result.as_str()))
            .collect();
        assert_eq!(got, [("lava", "job", "pass"), ("0_smoke", "echo", "pass")]);

        let orphan: Vec<RawTest> = parse::<Page<RawTest>>(&reply(200, TESTS_PAGE_2), "p")
            .expect("page")
            .results;
        let e = name_suites(orphan, &HashMap::new(), "T", "S").unwrap_err();
        assert_eq!(
            e.to_string(),
            "S: not a LAVA 2023.01 reply: expected suite 5 (of test case `echo`) listed"
        );
    }

    #[test]
    fn a_real_devices_reply_parses() {
        let page: Page<Device> = parse(&reply(200, DEVICES), "devices").expect("devices");
        assert_eq!(page.next, None);
        assert_eq!(
            page.results,
            [Device {
                hostname: "qemu01".into(),
                device_type: "qemu".into(),
                state: "Idle".into(),
                health: "Unknown".into(),
                worker_host: Some("w1".into()),
            }]
        );
    }

    #[test]
    fn tokens_never_print_their_secret() {
        let t = Token::new("  s3cret-token\n").expect("token");
        assert_eq!(format!("{t}"), "Token(***)");
        assert_eq!(format!("{t:?}"), "Token(***)");
        let server = Server::new("https://lava.test", Some(t)).expect("server");
        let shown = format!("{server:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("Token(***)"), "{shown}");
        assert!(Token::new(" \n").is_err());
        assert!(Token::new("two words").is_err());
    }

    #[test]
    fn tokens_come_from_files_and_variables_or_say_which() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("token");
        std::fs::write(&path, "abc123\n").expect("write");
        let t = Token::from_file(&path).expect("token");
        assert_eq!(t.0, "abc123");
        std::fs::write(&path, "\n").expect("write");
        let e = Token::from_file(&path).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("token file {}: empty", path.display())),
            "{e}"
        );
        let missing = dir.path().join("absent");
        let e = Token::from_file(&missing).unwrap_err().to_string();
        assert!(e.contains(&missing.display().to_string()), "{e}");
        let e = Token::from_env("XRUNBENCH_TEST_NO_SUCH_TOKEN_VAR")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("environment variable XRUNBENCH_TEST_NO_SUCH_TOKEN_VAR: "),
            "{e}"
        );
    }

    #[test]
    fn server_urls_are_checked_and_normalised() {
        for (given, base) in [
            ("http://127.0.0.1:18080", "http://127.0.0.1:18080/"),
            ("http://127.0.0.1:18080/", "http://127.0.0.1:18080/"),
            ("HTTPS://lava.test//", "https://lava.test/"),
            ("https://host/lava/", "https://host/lava/"),
            ("https://host/lava/api/v0.2/", "https://host/lava/"),
        ] {
            let s = Server::new(given, None).expect(given);
            assert_eq!(s.base_url(), base, "{given}");
            assert_eq!(s.api("jobs/1/"), format!("{base}api/v0.2/jobs/1/"));
        }
        for bad in [
            "ftp://host/",
            "host:8080",
            "http://",
            "http:///x",
            "http://a b/",
            "http://h/?x",
        ] {
            let e = Server::new(bad, None).unwrap_err().to_string();
            assert!(e.starts_with(&format!("LAVA server URL `{bad}`: ")), "{e}");
        }
    }

    #[test]
    fn a_reply_of_millions_of_strings_is_refused_before_it_is_built() {
        let n = xrunbench_schema::bounded::Limits::DOCUMENT.strings + 1;
        let body = format!(
            "{{\"count\":0,\"next\":null,\"previous\":null,\"results\":[{}\"\"]}}",
            "\"\",".repeat(n)
        );
        for (what, read) in readings(200, &body) {
            if let Err(ServerError::BadReply { expected, .. }) = read {
                assert!(expected.contains("strings: refused"), "{what}: {expected}");
                return;
            }
        }
        panic!("no reading refused a reply of {n} strings");
    }

    #[test]
    fn pagination_links_are_sent_to_the_server_given() {
        let s = Server::new("https://lava.test/", None).expect("server");
        assert_eq!(
            s.follow("http://127.0.0.1:18080/api/v0.2/jobs/5/tests/?limit=1&offset=8"),
            "https://lava.test/api/v0.2/jobs/5/tests/?limit=1&offset=8"
        );
        assert_eq!(
            s.follow("/api/v0.2/devices/?offset=2"),
            "https://lava.test/api/v0.2/devices/?offset=2"
        );
        assert_eq!(query_value("qemu x/ü"), "qemu%20x%2F%C3%BC");
        // Found by the fuzz target lava_reply: a link with a newline.
        let e = s.next_page("http:lava\nresult: pass", "U").unwrap_err();
        assert_eq!(
            e.to_string(),
            "U: not a LAVA 2023.01 reply: expected `next` as a URL, got `http:lava\\nresult: pass`"
        );
    }

    #[test]
    fn a_server_not_listening_is_unreachable_in_one_line() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let s = Server::new(&format!("http://127.0.0.1:{port}"), None).expect("server");
        let e = s.job(1).unwrap_err();
        assert!(matches!(e, ServerError::Unreachable { .. }), "{e:?}");
        let line = e.to_string();
        assert!(
            line.starts_with(&format!(
                "cannot reach the LAVA server at http://127.0.0.1:{port}/api/v0.2/jobs/1/: "
            )),
            "{line}"
        );
        assert!(line.to_lowercase().contains("refused"), "{line}");
        assert!(!line.contains('\n'));
    }

    /// A one-shot HTTP server: answers each of `replies` on its own
    /// connection and hands back the requests' heads.
    fn fake_server(
        replies: Vec<(u16, &'static str)>,
    ) -> (u16, std::thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let handle = std::thread::spawn(move || {
            let mut heads = Vec::new();
            for (status, body) in replies {
                let (mut conn, _) = listener.accept().expect("accept");
                let mut reader = BufReader::new(conn.try_clone().expect("clone"));
                let mut head = String::new();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).expect("read");
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().expect("length");
                    }
                    if line == "\r\n" || line.is_empty() {
                        break;
                    }
                    head.push_str(&line);
                }
                let mut body_in = vec![0; length];
                reader.read_exact(&mut body_in).expect("body");
                head.push_str(&String::from_utf8_lossy(&body_in));
                heads.push(head);
                write!(
                    conn,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .expect("write");
            }
            heads
        });
        (port, handle)
    }

    #[test]
    fn the_token_is_sent_as_its_header_and_pages_are_followed() {
        let (port, server) = fake_server(vec![(200, TESTS_PAGE_1), (200, TESTS_PAGE_2)]);
        let token = Token::new("sekrit").expect("token");
        let s = Server::new(&format!("http://127.0.0.1:{port}/"), Some(token)).expect("server");
        let raw: Vec<RawTest> = s
            .pages(s.api("jobs/5/tests/"), "test cases")
            .expect("pages");
        assert_eq!(raw.len(), 2);
        let heads = server.join().expect("fake server");
        assert!(
            heads[0].starts_with("GET /api/v0.2/jobs/5/tests/ HTTP/1.1"),
            "{}",
            heads[0]
        );
        assert!(
            heads[0].contains("authorization: Token sekrit\r\n")
                || heads[0].contains("Authorization: Token sekrit\r\n"),
            "{}",
            heads[0]
        );
        // The real server's `next` names 127.0.0.1:18080; it was asked here.
        assert!(
            heads[1].starts_with("GET /api/v0.2/jobs/5/tests/?limit=1&offset=8 HTTP/1.1"),
            "{}",
            heads[1]
        );
    }

    #[test]
    fn a_submission_posts_the_definition_as_json() {
        let (port, server) = fake_server(vec![(201, r#"{"job_ids":[6]}"#), (403, NO_TOKEN)]);
        let s = Server::new(&format!("http://127.0.0.1:{port}"), None).expect("server");
        assert_eq!(s.submit("job_name: x\n").expect("submitted"), vec![6]);
        let e = s.submit("job_name: x\n").unwrap_err();
        assert!(matches!(
            e,
            ServerError::Unauthorized {
                status: 403,
                token_sent: false,
                ..
            }
        ));
        let heads = server.join().expect("fake server");
        assert!(
            heads[0].starts_with("POST /api/v0.2/jobs/ HTTP/1.1"),
            "{}",
            heads[0]
        );
        assert!(
            heads[0].ends_with(r#"{"definition":"job_name: x\n"}"#),
            "{}",
            heads[0]
        );
        assert!(!heads[0].to_ascii_lowercase().contains("authorization"));
    }

    #[test]
    fn a_server_answering_a_byte_at_a_time_does_not_hold_a_stop() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (began, reply_began) = std::sync::mpsc::channel();
        let finished = Arc::new(AtomicBool::new(false));
        let server_finished = finished.clone();
        // A reply of ~110 bytes, one every 2 s: some 4 minutes to finish.
        std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            let mut reader = BufReader::new(conn.try_clone().expect("clone"));
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let body = r#"{"id":1,"state":"Finished","health":"Complete","actual_device":null}"#;
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            for (i, b) in reply.bytes().enumerate() {
                if conn.write_all(&[b]).and_then(|()| conn.flush()).is_err() {
                    return;
                }
                if i == 0 {
                    let _ = began.send(());
                }
                std::thread::sleep(Duration::from_secs(2));
            }
            server_finished.store(true, Ordering::SeqCst);
        });
        let stop = Arc::new(AtomicBool::new(false));
        let asked = stop.clone();
        let s = Server::new(&format!("http://127.0.0.1:{port}"), None)
            .expect("server")
            .stopped_by(move || asked.load(Ordering::SeqCst));
        let (done, answer) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(s.job(1));
        });
        reply_began.recv().expect("the reply began");
        // What the SIGINT handler does.
        stop.store(true, Ordering::SeqCst);
        let e = answer.recv().expect("an answer").unwrap_err();
        assert!(matches!(e, ServerError::Interrupted { .. }), "{e:?}");
        assert!(
            !finished.load(Ordering::SeqCst),
            "the request waited for the whole reply"
        );
        assert_eq!(
            e.to_string(),
            format!("http://127.0.0.1:{port}/api/v0.2/jobs/1/: given up: a signal asked to stop")
        );
    }
}
