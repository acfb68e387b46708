//! The agent face: an MCP server (rmcp, streamable HTTP at `/mcp`) whose tools are the REST
//! operations, read from the OpenAPI document.
//!
//! ```text
//!  agent ──tools/call──► McpServer ──builds an HTTP request──► the same axum Router (oneshot)
//!                                   (actor: agent, same edge, validation, idempotency, audit)
//! ```
//!
//! Tool input schemas are derived from the OpenAPI document (itself derived from the request
//! types), so REST, UI and agent can never disagree on a field.

pub mod catalog;
pub mod skills;

use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use tower::ServiceExt;

use catalog::ToolSpec;

/// What the MCP server needs to dispatch into the REST router.
pub struct McpContext {
    /// Set once the router exists (the router contains this server, hence the late binding).
    pub router: OnceLock<axum::Router>,
    /// The `Host` the inner requests carry, accepted by the edge guard.
    pub host: String,
    /// The bearer token, when the server requires one.
    pub token: Option<String>,
    /// Tool definitions with their input schemas, built once from the OpenAPI document.
    pub tools: Vec<Tool>,
}

impl McpContext {
    pub fn new(host: String, token: Option<String>) -> Arc<Self> {
        let doc = serde_json::to_value(crate::api::openapi::document()).unwrap_or_default();
        let tools = catalog::tools()
            .iter()
            .map(|spec| tool_of(spec, &doc))
            .collect();
        Arc::new(Self {
            router: OnceLock::new(),
            host,
            token,
            tools,
        })
    }
}

/// The rmcp handler (one per MCP session; all share the context).
#[derive(Clone)]
pub struct McpServer {
    pub cx: Arc<McpContext>,
}

/// Input schema of a tool: path and query parameters plus the request body's fields, as the
/// OpenAPI document describes them.
pub fn input_schema(spec: &ToolSpec, doc: &Value) -> Map<String, Value> {
    let op = &doc["paths"][&spec.path][spec.method.to_ascii_lowercase()];
    let mut properties = Map::new();
    let mut required: Vec<Value> = Vec::new();
    for p in op["parameters"].as_array().into_iter().flatten() {
        let location = p["in"].as_str().unwrap_or("");
        if location != "path" && location != "query" {
            continue;
        }
        let name = p["name"].as_str().unwrap_or_default();
        let arg = spec.rename_arg(name);
        let mut schema = p["schema"].clone();
        if let Some(d) = p["description"].as_str() {
            schema["description"] = json!(d);
        }
        properties.insert(arg.to_string(), schema);
        if p["required"].as_bool() == Some(true) {
            required.push(json!(arg));
        }
    }
    if let Some(reference) = op
        .pointer("/requestBody/content/application~1json/schema/$ref")
        .and_then(Value::as_str)
    {
        let name = reference.rsplit('/').next().unwrap_or_default();
        let body = &doc["components"]["schemas"][name];
        if let Some(props) = body["properties"].as_object() {
            for (k, v) in props {
                properties.insert(k.clone(), v.clone());
            }
        }
        if op.pointer("/requestBody/required").and_then(Value::as_bool) != Some(false) {
            required.extend(body["required"].as_array().cloned().unwrap_or_default());
        }
    }
    if spec.method != "GET" {
        properties.insert(
            "idempotency_key".into(),
            json!({"type": "string", "description": "Reuse the same key when resending this call: the operation is then created only once."}),
        );
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("additionalProperties".into(), json!(false));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    // The OpenAPI components the properties refer to (transitively) travel with the schema.
    if let Some(components) = doc["components"]["schemas"].as_object() {
        let mut defs = Map::new();
        let mut pending = refs_in(&Value::Object(schema.clone()));
        while let Some(name) = pending.pop() {
            if defs.contains_key(&name) {
                continue;
            }
            if let Some(def) = components.get(&name) {
                pending.extend(refs_in(def));
                defs.insert(name, def.clone());
            }
        }
        if !defs.is_empty() {
            schema.insert("$defs".into(), Value::Object(defs));
        }
    }
    let text = Value::Object(schema)
        .to_string()
        .replace("#/components/schemas/", "#/$defs/");
    serde_json::from_str(&text).unwrap_or_default()
}

/// Component names referenced (`#/components/schemas/X`) anywhere in a schema.
fn refs_in(v: &Value) -> Vec<String> {
    match v {
        Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| match (k.as_str(), v) {
                ("$ref", Value::String(r)) => r
                    .strip_prefix("#/components/schemas/")
                    .map(|n| vec![n.to_string()])
                    .unwrap_or_default(),
                _ => refs_in(v),
            })
            .collect(),
        Value::Array(list) => list.iter().flat_map(refs_in).collect(),
        _ => Vec::new(),
    }
}

fn tool_of(spec: &ToolSpec, doc: &Value) -> Tool {
    let annotations = ToolAnnotations::new()
        .read_only(spec.read_only())
        .destructive(spec.destructive);
    let mut annotations = annotations;
    annotations.idempotent_hint = Some(spec.idempotent());
    annotations.open_world_hint = Some(spec.open_world);
    Tool::new(
        spec.name.clone(),
        spec.full_description(),
        Arc::new(input_schema(spec, doc)),
    )
    .with_annotations(annotations)
}

impl McpServer {
    /// Builds the REST request for a tool call and runs it through the router.
    async fn dispatch(
        &self,
        spec: &ToolSpec,
        args: Map<String, Value>,
    ) -> Result<(StatusCode, Value), McpError> {
        let router = self
            .cx
            .router
            .get()
            .cloned()
            .ok_or_else(|| McpError::internal_error("router not ready", None))?;
        let mut path = spec.path.to_string();
        let mut query = Vec::new();
        let mut body = Map::new();
        let mut key = None;
        for (name, value) in args {
            if name == "idempotency_key" {
                key = value.as_str().map(str::to_string);
                continue;
            }
            let rest_name = spec.rest_name(&name);
            let text = match &value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if spec.path_params.contains(&rest_name) {
                let encoded = percent_encoding::utf8_percent_encode(
                    &text,
                    percent_encoding::NON_ALPHANUMERIC,
                )
                .to_string();
                path = path.replace(&format!("{{{rest_name}}}"), &encoded);
            } else if spec.query_params.contains(&rest_name) {
                query.push(format!(
                    "{rest_name}={}",
                    percent_encoding::utf8_percent_encode(
                        &text,
                        percent_encoding::NON_ALPHANUMERIC
                    )
                ));
            } else {
                body.insert(name, value);
            }
        }
        if path.contains('{') {
            return Err(McpError::invalid_params(
                format!("{} needs {}", spec.name, spec.path_params.join(", ")),
                None,
            ));
        }
        if !query.is_empty() {
            path = format!("{path}?{}", query.join("&"));
        }
        let method = Method::from_bytes(spec.method.as_bytes()).unwrap_or(Method::GET);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, &self.cx.host)
            .header(crate::api::ACTOR_HEADER, "agent");
        if let Some(token) = &self.cx.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(k) = key {
            req = req.header("idempotency-key", k);
        }
        let request = if spec.body {
            req.header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(Value::Object(body).to_string()))
        } else if !body.is_empty() {
            return Err(McpError::invalid_params(
                format!(
                    "unknown argument(s) for {}: {}",
                    spec.name,
                    body.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
                None,
            ));
        } else {
            req.body(Body::empty())
        }
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let response = router
            .oneshot(request)
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 16 * 1024 * 1024)
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| json!({"text": String::from_utf8_lossy(&bytes)}));
        Ok((status, value))
    }
}

/// Adds the status contract to a result: which tool decides completion, and what to do next.
pub fn with_status_contract(spec: &ToolSpec, status: StatusCode, mut value: Value) -> Value {
    if let Some(obj) = value.as_object_mut() {
        if let Some(id) = obj.get("operationId").cloned().or_else(|| {
            (spec.name == "operation_get"
                || spec.name == "operation_retry"
                || spec.name == "operation_cancel")
                .then(|| obj.get("id").cloned())
                .flatten()
        }) {
            obj.insert("operation_id".into(), id);
            obj.insert("status_tool".into(), json!("operation_get"));
            if let Some(d) = &spec.duration {
                obj.insert("expected_duration".into(), json!(d));
            }
        }
        if spec.name == "operation_get" || status == StatusCode::ACCEPTED {
            let state = obj
                .get("state")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let next = match state.as_str() {
                "succeeded" => "done: report the result",
                "failed" => {
                    "failed: explain `error`, then call operation_retry once the cause is fixed"
                }
                "cancelled" => "cancelled: call operation_retry to resume",
                _ => "in progress: call operation_get with wait_seconds=60 until state is terminal",
            };
            obj.insert("next_step".into(), json!(next));
            if state == "failed" {
                obj.insert("retry_tool".into(), json!("operation_retry"));
            }
        }
    }
    value
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("instantstart", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "InstantStart: SageMaker HyperPod on EKS. Inspect before creating (cluster_list, zone_list, \
                 instance_type_list); ask only for zone, instance type and capacity type; monitor every \
                 operation with operation_get(wait_seconds) until it is terminal.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.cx.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(spec) = catalog::tool(&request.name) else {
            return Err(McpError::invalid_params(
                format!("unknown tool {}", request.name),
                None,
            ));
        };
        let (status, value) = self
            .dispatch(spec, request.arguments.unwrap_or_default())
            .await?;
        let result = if status.is_success() {
            let value = with_status_contract(spec, status, value);
            if value.is_object() {
                CallToolResult::structured(value)
            } else {
                // Structured content is an object; the text block stays the REST body verbatim.
                let mut r = CallToolResult::structured(json!({ "items": value }));
                r.content = vec![rmcp::model::ContentBlock::text(value.to_string())];
                r
            }
        } else {
            // The REST problem body, unchanged: the agent sees `field` and `hint`.
            CallToolResult::structured_error(value)
        };
        Ok(CallToolResponse::Complete(result))
    }
}
