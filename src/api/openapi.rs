//! The OpenAPI document, derived from the same declarations as the router: each handler's
//! `#[utoipa::path]` is registered once with `routes!` in its resource's `router()`, which
//! gives both the axum route and the document's entry. The MCP tools are checked against it.

use std::sync::OnceLock;

use axum::Json;
use serde_json::{json, Value};
use utoipa::OpenApi;

use crate::error::Problem;
use crate::service::{
    self, Accepted, ActiveClusterRequest, ClusterView, CreateClusterRequest, CreateHyperPodRequest,
    EmptyRequest, PipelineRequest,
};
use crate::store::{ClusterRecord, OpState, Operation, Phase, PhaseState};

/// What no route declares by itself: the title, and schemas named for clients.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "InstantStart",
        description = "Control plane for SageMaker HyperPod clusters on EKS. Errors are application/problem+json."
    ),
    components(schemas(
        Problem,
        Accepted,
        Operation,
        Phase,
        OpState,
        PhaseState,
        ClusterRecord,
        ClusterView,
        CreateClusterRequest,
        CreateHyperPodRequest,
        PipelineRequest,
        EmptyRequest,
        ActiveClusterRequest,
        crate::cloud::Zone,
        super::aws::Health,
        super::clusters::ActiveCluster,
        super::aws::InstanceTypes,
        crate::cloud::sandbox::CallCounts,
        service::Preflight,
        service::QuotaCheck,
        crate::cloud::TrainingPlan,
        crate::cloud::ClusterNode,
        service::NodeList,
        service::GroupView,
        service::UpdateGroupRequest,
        super::groups::Unchanged,
        crate::service::shared::preview::Plan,
    ))
)]
pub struct ApiDoc;

/// The document as served: built once from the routers, then completed by [`complete`].
static DOC: OnceLock<Value> = OnceLock::new();

pub fn document() -> &'static Value {
    DOC.get_or_init(|| complete(super::rest().split_for_parts().1))
}

/// Keeps the document the router was built with, so start-up builds it once.
pub(crate) fn keep(doc: utoipa::openapi::OpenApi) {
    let _ = DOC.set(complete(doc));
}

pub async fn serve() -> Json<&'static Value> {
    Json(document())
}

/// Whether an operation of the document takes `dryRun`: every writing one but those
/// `preview::NOT_PREVIEWED` names.
pub fn takes_dry_run(path: &str, method: &str) -> bool {
    ["post", "put", "patch", "delete"].contains(&method)
        && !super::preview::NOT_PREVIEWED
            .iter()
            .any(|(m, p, _)| m.eq_ignore_ascii_case(method) && *p == path)
}

/// Declares `dryRun` and its answer on a writing operation of the document.
pub fn declare_dry_run(op: &mut Value) {
    let param = json!({
        "name": "dryRun",
        "in": "query",
        "required": false,
        "description": "true: answer with the plan (the operations and phases it would run, the mutating calls each makes, what it would change, the running workloads it would disturb) and write nothing.",
        "schema": {"type": "boolean"},
    });
    match op.get_mut("parameters").and_then(Value::as_array_mut) {
        Some(params) => params.push(param),
        None => op["parameters"] = json!([param]),
    }
    let plan = json!({"$ref": "#/components/schemas/Plan"});
    let ok = &mut op["responses"]["200"];
    match ok.pointer_mut("/content/application~1json/schema") {
        // A route that already answers 200 answers its own body or, previewed, the plan.
        Some(schema) => {
            let own = schema.take();
            *schema = json!({"anyOf": [own, plan]});
        }
        None => {
            *ok = json!({
                "description": "With `dryRun=true`: the plan; nothing was written",
                "content": {"application/json": {"schema": plan}},
            })
        }
    }
}

/// The problem answers every route shares, by what the route takes. The edge, the extractors
/// and the error mapping give them whatever the handler declares, so they are declared here
/// once rather than on each of seventy routes.
const ALWAYS: &[(&str, &str)] = &[
    (
        "401",
        "A token is configured and the request did not send it",
    ),
    (
        "403",
        "Refused at the edge: a `Host` or `Origin` this server does not accept",
    ),
    (
        "500",
        "An internal error (a bug); the request id in the log line says where",
    ),
    ("502", "A cloud API refused a call the request needed"),
    ("503", "A cloud API was throttled or unavailable; try again"),
];
const WITH_INPUT: &[(&str, &str)] = &[
    ("400", "A malformed request: a query string, header or body that cannot be read, or a body not sent as JSON"),
    ("422", "A field fails validation; `field` names it and `hint` says what is valid"),
];
const WITH_PATH: &[(&str, &str)] = &[("404", "The named resource does not exist")];
const WITH_BODY: &[(&str, &str)] = &[("413", "The body is larger than the server accepts")];

/// An RFC 1123 label, as `validate::dns_label` accepts it (claims, deployments, endpoints,
/// pools, jobs, workloads, namespaces).
pub const DNS_LABEL: &str = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$";
/// An instance group name, as `validate::instance_group_name` accepts it.
pub const GROUP_NAME: &str = "^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$";
/// A UUID as the operation routes parse it: hyphenated or 32 hex digits.
const OPERATION_ID: &str = "^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[0-9a-fA-F]{32})$";

/// What the extractors and validators accept for a path parameter, the same on every route.
fn path_pattern(path: &str, param: &str) -> Option<String> {
    let max = crate::service::cluster::validate::MAX_CLUSTER_NAME;
    match (param, path) {
        ("name", p) if p.starts_with("/api/clusters/{name}") => {
            Some(format!("^[a-z]([a-z0-9-]{{0,{}}}[a-z0-9])?$", max - 2))
        }
        ("id", p) if p.starts_with("/api/operations/{id}") => Some(OPERATION_ID.into()),
        ("id", p) if p.starts_with("/api/clusters/{name}/nodes/{id}") => {
            Some("^i-[0-9a-fA-F]{8,17}$".into())
        }
        ("claim" | "deployment" | "endpoint" | "pool" | "space" | "job" | "workload", _) => {
            Some(DNS_LABEL.into())
        }
        ("group", _) => Some(GROUP_NAME.into()),
        ("run", _) => Some("^[A-Za-z0-9_-]{1,64}$".into()),
        _ => None,
    }
}

/// Makes the document say what goes over the wire: every problem answer is
/// `application/problem+json`, and every operation lists the problem statuses it can return.
fn complete(doc: utoipa::openapi::OpenApi) -> Value {
    let mut doc = serde_json::to_value(doc).unwrap_or_default();
    let problem = json!({"$ref": "#/components/schemas/Problem"});
    let Some(paths) = doc["paths"].as_object_mut() else {
        return doc;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            if !["get", "put", "post", "delete", "patch"].contains(&method.as_str()) {
                continue;
            }
            if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
                for param in params.iter_mut().filter(|p| p["in"] == "path") {
                    if let Some(pattern) = path_pattern(path, param["name"].as_str().unwrap_or(""))
                    {
                        param["schema"]["pattern"] = json!(pattern);
                    }
                }
            }
            let with_path = path.contains('{');
            let previewed = takes_dry_run(path, method);
            let with_query = previewed
                || op["parameters"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|p| p["in"] == "query"));
            let with_body = op.get("requestBody").is_some();
            let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
                continue;
            };
            for response in responses.values_mut() {
                // `get_mut`, not indexing: indexing would add `"content": null`.
                let Some(content) = response.get_mut("content").and_then(Value::as_object_mut)
                else {
                    continue;
                };
                if content
                    .get("application/json")
                    .is_some_and(|c| c["schema"] == problem)
                {
                    if let Some(c) = content.remove("application/json") {
                        content.insert("application/problem+json".into(), c);
                    }
                }
            }
            // A request that repeats one already accepted (the same Idempotency-Key) starts
            // nothing and answers 200 with the same body: its operation.
            let accepted = json!({"$ref": "#/components/schemas/Accepted"});
            if let Some(started) = responses
                .get("202")
                .filter(|r| r.pointer("/content/application~1json/schema") == Some(&accepted))
                .cloned()
            {
                responses.entry("200").or_insert_with(|| {
                    let mut replay = started;
                    replay["description"] = json!(
                        "Nothing new started: the request repeats one already accepted; its operation"
                    );
                    replay
                });
            }
            let mut shared: Vec<&(&str, &str)> = ALWAYS.iter().collect();
            if with_path || with_query || with_body {
                shared.extend(WITH_INPUT);
            }
            if with_path {
                shared.extend(WITH_PATH);
            }
            if with_body {
                shared.extend(WITH_BODY);
            }
            for (status, description) in shared {
                responses.entry(*status).or_insert_with(|| {
                    json!({
                        "description": description,
                        "content": {"application/problem+json": {"schema": problem}},
                    })
                });
            }
            if previewed {
                declare_dry_run(op);
            }
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operations() -> Vec<(String, String, Value)> {
        let mut ops = Vec::new();
        for (path, item) in document()["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                ops.push((method.clone(), path.clone(), op.clone()));
            }
        }
        ops
    }

    #[test]
    fn every_problem_answer_is_declared_as_problem_json() {
        for (method, path, op) in operations() {
            for (status, response) in op["responses"].as_object().unwrap() {
                let content = response["content"].as_object();
                let json = content.and_then(|c| c.get("application/json"));
                assert!(
                    json.is_none_or(|c| c["schema"]["$ref"] != "#/components/schemas/Problem"),
                    "{method} {path} {status} declares a problem as application/json"
                );
                if status.starts_with('4') || status.starts_with('5') {
                    assert!(
                        content.is_some_and(|c| c.contains_key("application/problem+json")),
                        "{method} {path} {status} has no problem body"
                    );
                }
            }
        }
    }

    #[test]
    fn an_operation_that_starts_work_documents_the_replay_answer() {
        let mut started = 0;
        let cluster = &document()["paths"]["/api/clusters"]["post"]["responses"];
        // A replay answers what was accepted; a preview (`dryRun=true`), its plan.
        let json = "/content/application~1json/schema";
        assert_eq!(
            cluster["200"].pointer(&format!("{json}/anyOf")),
            Some(&serde_json::json!([
                cluster["202"].pointer(json).unwrap(),
                {"$ref": "#/components/schemas/Plan"}
            ]))
        );
        for (method, path, op) in operations() {
            let r = &op["responses"];
            if r["202"]["content"]["application/json"]["schema"]["$ref"]
                == "#/components/schemas/Accepted"
            {
                started += 1;
                // Its own 200 (an unchanged resource) where it has one, else the replay's.
                assert!(
                    r["200"]["content"].is_object(),
                    "{method} {path}: a replayed request answers 200"
                );
            }
        }
        assert!(started >= 20, "{started}");
    }

    #[test]
    fn operations_taking_input_declare_validation_and_those_naming_a_resource_404() {
        for (method, path, op) in operations() {
            let r = &op["responses"];
            for status in ["401", "403", "500", "503"] {
                assert!(r.get(status).is_some(), "{method} {path} lacks {status}");
            }
            if path.contains('{') {
                assert!(r.get("404").is_some(), "{method} {path} lacks 404");
                assert!(r.get("422").is_some(), "{method} {path} lacks 422");
            }
            if op.get("requestBody").is_some() {
                for status in ["400", "413", "422"] {
                    assert!(r.get(status).is_some(), "{method} {path} lacks {status}");
                }
            }
        }
    }

    /// Bodies that name a cluster declare the same pattern as the path parameter.
    #[test]
    fn bodies_declare_the_cluster_name_pattern_of_the_path() {
        let doc = document();
        let pattern = path_pattern("/api/clusters/{name}", "name").unwrap();
        for (schema, field) in [
            ("CreateClusterRequest", "name"),
            ("PipelineRequest", "name"),
            ("ActiveClusterRequest", "name"),
            ("ImportRequest", "eksClusterName"),
        ] {
            assert_eq!(
                doc["components"]["schemas"][schema]["properties"][field]["pattern"], pattern,
                "{schema}.{field}"
            );
        }
        let count = &doc["components"]["schemas"]["PipelineRequest"]["properties"]["instanceCount"];
        assert_eq!(
            (count["minimum"].as_f64(), count["maximum"].as_f64()),
            (Some(1.0), Some(1000.0))
        );
    }

    /// Two request types of one name would share one schema in the document, and one of them
    /// would be documented with the other's fields: every schema name is one type's.
    #[test]
    fn no_two_schema_types_share_a_name() {
        fn walk(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    let lines: Vec<&str> = text.lines().collect();
                    for (i, l) in lines.iter().enumerate() {
                        if !l.contains("ToSchema") || !l.trim_start().starts_with("#[derive") {
                            continue;
                        }
                        let mut named = None;
                        for next in &lines[i + 1..(i + 8).min(lines.len())] {
                            if let Some(a) = next.split("schema(as = ").nth(1) {
                                named = Some(a.split(')').next().unwrap().to_string());
                            }
                            let t = next.trim_start().trim_start_matches("pub ");
                            let t = t.trim_start_matches("(crate) ");
                            if let Some(rest) =
                                t.strip_prefix("struct ").or(t.strip_prefix("enum "))
                            {
                                let name = rest.split([' ', '{', '<', '(', ';']).next().unwrap();
                                let name = named.take().unwrap_or_else(|| name.to_string());
                                out.push((name, p.display().to_string()));
                                break;
                            }
                        }
                    }
                }
            }
        }
        let mut found = Vec::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut found,
        );
        assert!(found.len() > 50, "{}", found.len());
        found.sort();
        for pair in found.windows(2) {
            assert_ne!(pair[0].0, pair[1].0, "{} and {}", pair[0].1, pair[1].1);
        }
        let endpoint = &document()["components"]["schemas"]["EndpointRequest"]["properties"];
        assert!(endpoint["autoscaling"]
            .to_string()
            .contains("EndpointAutoscalingRequest"));
    }

    /// The recipe names the document lists are the recipes there are.
    #[test]
    fn the_recipe_pattern_names_every_recipe() {
        let names: Vec<&str> = crate::service::training::RECIPES
            .iter()
            .map(|r| r.name)
            .collect();
        let doc = document();
        assert_eq!(
            doc["components"]["schemas"]["TrainingJobRequest"]["properties"]["recipe"]["pattern"],
            format!("^({})$", names.join("|"))
        );
    }

    /// Each declared pattern decides a sample as its validator does.
    #[test]
    fn every_path_pattern_agrees_with_its_validator() {
        use crate::service::cluster::validate;
        let agree = |path: &str, param: &str, ok: &dyn Fn(&str) -> bool, samples: &[&str]| {
            let schema = json!({"type": "string", "pattern": path_pattern(path, param).unwrap()});
            for s in samples {
                assert_eq!(
                    jsonschema::is_valid(&schema, &json!(s)),
                    ok(s),
                    "{param}: `{s}`"
                );
            }
        };
        let long = "a".repeat(63);
        let longer = "a".repeat(64);
        let labels = [
            "a", "0", "s3-claim", "a-b-c", &long, &longer, "", "-a", "a-", "A", "a_b", "é",
        ];
        agree(
            "/x",
            "pool",
            &|s| validate::dns_label("f", "x", s).is_ok(),
            &labels,
        );
        agree(
            "/x",
            "group",
            &|s| validate::instance_group_name("f", s).is_ok(),
            &labels,
        );
        let ids = [
            "01a23c21-f724-7146-9c4a-a7e79996c3b7",
            "01a23c21f72471469c4aa7e79996c3b7",
            "f463a4Ed33A0-CFef-dD9EdffbEaeB26cd",
            "01a23c21-f724-7146-9c4a",
            "",
        ];
        agree(
            "/api/operations/{id}",
            "id",
            &|s| uuid::Uuid::try_parse(s).is_ok(),
            &ids,
        );
    }

    #[test]
    fn a_documented_path_pattern_accepts_what_the_validator_accepts() {
        let pattern = path_pattern("/api/clusters/{name}", "name").unwrap();
        let schema = json!({"type": "string", "pattern": pattern});
        for name in [
            "a",
            "demo",
            "llm-train-1",
            "a-b",
            &"a".repeat(24),
            &"a".repeat(25),
            "A",
            "1a",
            "a-",
            "",
            "a_b",
        ] {
            assert_eq!(
                jsonschema::is_valid(&schema, &json!(name)),
                crate::service::cluster::validate::cluster_name("name", name).is_ok(),
                "`{name}`"
            );
        }
    }

    #[test]
    fn the_problem_hint_is_a_string_a_list_of_strings_or_an_object() {
        let hint = &document()["components"]["schemas"]["Problem"]["properties"]["hint"];
        let kinds: Vec<&Value> = hint["oneOf"].as_array().unwrap().iter().collect();
        assert_eq!(
            kinds,
            [
                &json!({"type": "string"}),
                &json!({"type": "array", "items": {"type": "string"}}),
                &json!({"type": "object"}),
            ],
            "{hint}"
        );
    }
}
