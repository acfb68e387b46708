//! What every request handler can reach: the server's state, built once by `build_app`. A leaf
//! of the server layer: the routes, the edge and the MCP tools use it, and it names no route.

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::api;
use crate::cloud::sandbox::Sandbox;
use crate::ops::Engine;
use crate::service;

/// Everything a request handler can reach, behind one pointer: every request's extractor
/// clones the state, and one shared count is one atomic step where a dozen fields were a dozen
/// (each a cache line the two workers pass back and forth).
#[derive(Clone)]
pub struct AppState(pub(crate) Arc<AppParts>);

impl std::ops::Deref for AppState {
    type Target = AppParts;
    fn deref(&self) -> &AppParts {
        &self.0
    }
}

/// The parts of [`AppState`].
pub struct AppParts {
    /// Durable operations, the store and the cloud ports.
    pub engine: Engine,
    /// Host/Origin allow-list and token.
    pub edge: Arc<api::EdgePolicy>,
    /// Sign-in settings when people sign in with their AWS identity (`--identity iam`);
    /// `None`: local single-user.
    pub people: Option<Arc<service::people::People>>,
    /// The simulated account, when running with `--cloud sandbox`.
    pub sandbox: Option<Arc<Sandbox>>,
    /// Why the configured cloud cannot be used (shown on `/healthz` and in the UI).
    pub cloud_warning: Option<String>,
    /// The managed features users may enable (all when the list is empty).
    pub allowed_features: Arc<Vec<String>>,
    /// The caps on what clients hold open: log follows, event streams, long-polls.
    pub caps: Arc<service::caps::Caps>,
    /// The MCP sessions open now (counted against `caps.mcp_sessions` at the edge).
    pub mcp_sessions: Arc<LocalSessionManager>,
    /// The Prometheus KEDA reads for autoscaling when a request names none.
    pub prometheus_url: Option<Arc<str>>,
    /// The account's Grafana workspace the observability add-on's dashboards are in.
    pub grafana_workspace: Option<Arc<str>>,
    /// What training pods may install at start, and from where.
    pub pod_packages: Arc<service::training::PodPackages>,
    /// Each cluster's status, serialized once per change of its view.
    pub status_memo: Arc<api::memo::Memo>,
    /// Pages of the cluster and operation lists, serialized once per stored revision.
    pub list_memo: Arc<api::memo::Memo>,
    /// Tickets and sessions that open spaces through the control plane.
    pub space_sessions: Arc<api::space_sessions::Sessions>,
    /// Each region's AWS Price List as last read (the cost reports' prices).
    pub price_book: Arc<service::costs::PriceBook>,
    /// The `/healthz` answer, made once: nothing in it changes while the process lives.
    pub health: std::sync::OnceLock<axum::body::Bytes>,
    /// The Kiro agent's profile, as Markdown and as JSON: made by the MCP layer from the tools'
    /// catalog, which is derived from every route's OpenAPI entry, the agent kit's route among
    /// them, so the route is handed the maker instead of importing it.
    pub agent_profile: fn() -> (String, serde_json::Value),
}
