//! The agent kit: the Kiro CLI 3 agent profile (Markdown and JSON), its prompt, a generic MCP
//! client configuration, the skills.

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::error::ApiResult;
use crate::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(agent_config))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfig {
    /// `hypd-inst-agent` for Kiro CLI 3 as Markdown with YAML front matter (save as
    /// `~/.kiro/agents/hypd-inst-agent.md`; `scripts/install-agent` does it with the skills).
    pub profile: String,
    /// The same profile as JSON (the prompt inline).
    #[schema(value_type = Object)]
    pub agent: Value,
    pub prompt: String,
    /// For other MCP clients (`mcpServers` with the HTTP URL).
    #[schema(value_type = Object)]
    pub mcp_client: Value,
    /// Skill name → SKILL.md text.
    #[schema(value_type = Object)]
    pub skills: Value,
}

/// The hypd-inst-agent configuration for Kiro CLI, its prompt, a generic MCP client configuration
/// and the skills.
#[utoipa::path(get, path = "/api/agent/config", operation_id = "agent_config_get", responses((status = 200, body = AgentConfig)))]
async fn agent_config(State(state): State<AppState>) -> ApiResult<Json<AgentConfig>> {
    let parse = |text: &str| serde_json::from_str::<Value>(text).map_err(anyhow::Error::from);
    let skills: serde_json::Map<String, Value> = crate::mcp::skills::SKILLS
        .iter()
        .map(|(name, text)| (name.to_string(), Value::String(text.to_string())))
        .collect();
    let (profile, agent) = (state.agent_profile)();
    Ok(Json(AgentConfig {
        profile,
        agent,
        prompt: crate::mcp::skills::AGENT_PROMPT.to_string(),
        mcp_client: parse(include_str!("../../skills/hypd-inst-agent/mcp.json"))?,
        skills: Value::Object(skills),
    }))
}
