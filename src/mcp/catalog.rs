//! The tool catalog, derived from the OpenAPI document: every REST operation is one tool, named
//! by its `operation_id`, described by its handler's doc comment, annotated by its `x-mcp`
//! extension (`destructive`, `openWorld`, `duration`, `arguments` renames). Adding a route with
//! its `#[utoipa::path]` adds the tool; nothing else is written twice.

use std::sync::OnceLock;

use serde_json::Value;

/// One MCP tool = one REST operation.
#[derive(Debug)]
pub struct ToolSpec {
    /// `area_verb`, snake_case: the operation's `operationId`.
    pub name: String,
    /// Upper case, as on the wire.
    pub method: String,
    /// The OpenAPI path template.
    pub path: String,
    pub description: String,
    /// Path parameters (names as in the template).
    pub path_params: Vec<String>,
    /// Query parameters (REST names).
    pub query_params: Vec<String>,
    /// Whether the REST operation takes a JSON body (its fields become tool arguments).
    pub body: bool,
    /// Deletes or stops something that cannot simply be recreated.
    pub destructive: bool,
    /// Reaches the cloud account (AWS or the clusters), not only this control plane's state.
    pub open_world: bool,
    /// How long the operation it starts usually takes.
    pub duration: Option<String>,
    /// (tool argument, REST name) where they differ.
    pub renames: Vec<(String, String)>,
}

impl ToolSpec {
    pub fn read_only(&self) -> bool {
        self.method == "GET"
    }

    /// GET, PUT and DELETE are idempotent by HTTP semantics; our POSTs become so only with an
    /// `idempotency_key`.
    pub fn idempotent(&self) -> bool {
        matches!(self.method.as_str(), "GET" | "PUT" | "DELETE")
    }

    /// The tool argument name for a REST parameter.
    pub fn rename_arg<'a>(&'a self, rest: &'a str) -> &'a str {
        self.renames
            .iter()
            .find(|(_, r)| r == rest)
            .map(|(a, _)| a.as_str())
            .unwrap_or(rest)
    }

    /// The REST parameter name for a tool argument.
    pub fn rest_name(&self, arg: &str) -> String {
        self.renames
            .iter()
            .find(|(a, _)| a == arg)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| arg.to_string())
    }

    /// The description with the status contract spelled out for mutating tools.
    pub fn full_description(&self) -> String {
        match &self.duration {
            Some(d) => format!(
                "{} Starts a durable operation (usually {d}); the result carries operation_id. Completion is decided by operation_get: call it with wait_seconds until state is succeeded, failed or cancelled.",
                self.description
            ),
            None => self.description.clone(),
        }
    }

    /// The tool of one OpenAPI operation.
    fn of(method: &str, path: &str, op: &Value) -> Option<Self> {
        let name = op["operationId"].as_str()?.to_string();
        // A person's own session and tokens are theirs to handle, not an agent's.
        if op["x-mcp"]["tool"] == false {
            return None;
        }
        let text = |key: &str| op[key].as_str().unwrap_or_default().to_string();
        // Doc-comment lines arrive joined by newlines: one paragraph reads as one line.
        let description = [text("summary"), text("description")]
            .iter()
            .flat_map(|t| t.split_whitespace())
            .collect::<Vec<_>>()
            .join(" ");
        let params_in = |location: &str| {
            op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == location)
                .filter_map(|p| p["name"].as_str().map(str::to_string))
                .collect()
        };
        let mcp = &op["x-mcp"];
        let flag = |key: &str| mcp[key].as_bool().unwrap_or(false);
        Some(Self {
            name,
            method: method.to_ascii_uppercase(),
            path: path.to_string(),
            description,
            path_params: params_in("path"),
            query_params: params_in("query"),
            body: op.get("requestBody").is_some(),
            destructive: flag("destructive"),
            open_world: flag("openWorld"),
            duration: mcp["duration"].as_str().map(str::to_string),
            renames: mcp["arguments"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(arg, rest)| Some((arg.clone(), rest.as_str()?.to_string())))
                .collect(),
        })
    }
}

/// Every tool, in the document's order (paths, then methods).
pub fn tools() -> &'static [ToolSpec] {
    static TOOLS: OnceLock<Vec<ToolSpec>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let doc = crate::api::openapi::document();
        let mut tools = Vec::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for (method, op) in item.as_object().into_iter().flatten() {
                tools.extend(ToolSpec::of(method, path, op));
            }
        }
        tools
    })
}

/// The tool of a name.
pub fn tool(name: &str) -> Option<&'static ToolSpec> {
    tools().iter().find(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::collections::BTreeSet;

    /// Tools that delete or stop something.
    const DESTRUCTIVE: &[&str] = &[
        "cluster_delete",
        "cluster_forget",
        "operation_cancel",
        "node_replace",
        "node_delete",
        "instance_group_delete",
        "storage_delete",
        "features_update",
        "job_delete",
        "training_job_delete",
        "deployment_delete",
        "endpoint_delete",
        "space_delete",
        "team_delete",
        "team_access_revoke",
        "pool_delete",
        "pool_unassign",
        "hyperpod_software_update",
        "cluster_upgrade",
    ];

    fn openapi() -> Value {
        crate::api::openapi::document().clone()
    }

    #[test]
    fn no_body_field_shadows_a_path_or_query_parameter() {
        // They share one flat tool input: a clash would silently send one value for both.
        let doc = openapi();
        for t in tools().iter().filter(|t| t.body) {
            let op = &doc["paths"][&t.path][t.method.to_ascii_lowercase()];
            let Some(reference) = op
                .pointer("/requestBody/content/application~1json/schema/$ref")
                .and_then(Value::as_str)
            else {
                continue;
            };
            let name = reference.rsplit('/').next().unwrap();
            let body = &doc["components"]["schemas"][name]["properties"];
            for p in t.path_params.iter().chain(&t.query_params) {
                assert!(
                    body.get(t.rename_arg(p)).is_none(),
                    "{}: body field `{p}` shadows the parameter",
                    t.name
                );
            }
        }
    }

    #[test]
    fn every_rest_operation_is_one_described_tool() {
        let doc = openapi();
        let operations: usize = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|item| item.as_object().unwrap().values())
            .filter(|op| op["x-mcp"]["tool"] != false)
            .count();
        assert_eq!(tools().len(), operations, "an operation without a tool");
        assert!(operations > 40, "the document lists the routes");
        for t in tools() {
            assert!(
                t.description.len() > 20,
                "{}: the handler's doc comment is the tool's description",
                t.name
            );
            for (arg, rest) in &t.renames {
                assert!(
                    t.path_params.contains(rest) || t.query_params.contains(rest),
                    "{}: `{arg}` renames `{rest}`, which is no parameter",
                    t.name
                );
            }
        }
    }

    #[test]
    fn names_are_area_verb_snake_case_and_unique() {
        let mut seen = BTreeSet::new();
        for t in tools() {
            assert!(
                t.name.contains('_') && t.name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{}",
                t.name
            );
            assert!(seen.insert(&t.name), "duplicate {}", t.name);
        }
    }

    #[test]
    fn annotations_follow_the_http_method_and_the_destructive_list() {
        for t in tools() {
            assert_eq!(t.read_only(), t.method == "GET", "{}", t.name);
            assert_eq!(
                t.destructive,
                DESTRUCTIVE.contains(&t.name.as_str()),
                "{}",
                t.name
            );
            assert_eq!(
                t.idempotent(),
                matches!(t.method.as_str(), "GET" | "PUT" | "DELETE"),
                "{}",
                t.name
            );
            // Every tool that starts an operation names its status tool and duration.
            let starts_operation = t.method != "GET"
                && !matches!(
                    t.name.as_str(),
                    "active_cluster_set"
                        | "active_cluster_clear"
                        | "operation_cancel"
                        | "deployment_invoke"
                        | "endpoint_invoke"
                        | "space_open"
                        | "space_connect"
                        | "space_sessions_end"
                );
            assert_eq!(t.duration.is_some(), starts_operation, "{}", t.name);
            if starts_operation {
                assert!(t.full_description().contains("operation_get"), "{}", t.name);
            }
        }
    }

    #[test]
    fn input_schemas_carry_the_rest_fields_and_parameters() {
        let doc = openapi();
        let schema_of = |name: &str| {
            let spec = tool(name).unwrap();
            Value::Object(crate::mcp::input_schema(spec, &doc))
        };
        let pipeline = schema_of("pipeline_create");
        for field in [
            "name",
            "zone",
            "instanceType",
            "instanceCount",
            "capacityType",
            "idempotency_key",
        ] {
            assert!(pipeline["properties"].get(field).is_some(), "{field}");
        }
        assert!(pipeline["required"]
            .as_array()
            .unwrap()
            .contains(&Value::from("instanceType")));
        let get = schema_of("operation_get");
        assert!(
            get["properties"].get("wait_seconds").is_some()
                && get["properties"].get("id").is_some()
        );
        assert_eq!(get["required"], serde_json::json!(["id"]));
        assert!(schema_of("instance_type_list")["properties"]
            .get("zone")
            .is_some());
    }
}
