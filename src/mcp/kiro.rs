//! The `hypd-inst-agent` profile for Kiro CLI 3: a Markdown file whose YAML front matter holds
//! the MCP server, the `skill://` resources and capability-based `permissions`, and whose body
//! is the system prompt (or the equivalent JSON). Generated from the tool catalog, so the
//! read-only tools it allows are exactly the read-only tools there are; every other tool falls
//! to Kiro's default, `ask`.

use serde_json::{json, Map, Value};

use super::catalog::tools;
use super::skills::{AGENT, AGENT_PROMPT, SKILLS};

/// Where the profile expects the server (the install script rewrites it for another address).
pub const MCP_URL: &str = "http://localhost:3099/mcp";

/// The profile as JSON (the prompt inline).
pub fn agent() -> Value {
    let read_only: Vec<String> = tools()
        .iter()
        .filter(|t| t.read_only())
        .map(|t| format!("instantstart/{}", t.name))
        .collect();
    let mut agent = profile_fields(read_only);
    agent.insert("prompt".into(), json!(AGENT_PROMPT));
    Value::Object(agent)
}

fn profile_fields(read_only: Vec<String>) -> Map<String, Value> {
    let resources: Vec<String> = SKILLS.iter().map(|(n, _)| super::skills::uri(n)).collect();
    let fields = json!({
        "name": AGENT,
        "description": "Creates and runs SageMaker HyperPod clusters on EKS through the InstantStart control plane: inspects first, asks only decision-level questions, and monitors every operation to its end.",
        "tools": ["@instantstart"],
        "mcpServers": {"instantstart": {"url": MCP_URL, "headers": {"X-InstantStart-Actor": "agent"}}},
        "resources": resources,
        "permissions": [{"capability": "mcp", "effect": "allow", "match": read_only}],
        "welcomeMessage": "InstantStart agent: ask me to create a HyperPod cluster, add capacity, train or serve a model.",
    });
    match fields {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The profile as Markdown: the JSON's fields as YAML front matter, the prompt as the body.
pub fn profile() -> String {
    let mut fields = match agent() {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    fields.remove("prompt");
    let mut out = String::from("---\n");
    yaml(&Value::Object(fields), 0, &mut out);
    out.push_str("---\n");
    out.push_str(AGENT_PROMPT);
    out
}

/// Block-style YAML of a JSON value; scalars are JSON (double-quoted strings are valid YAML).
fn yaml(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match v {
                    Value::Object(m) if !m.is_empty() => {
                        out.push_str(&format!("{pad}{k}:\n"));
                        yaml(v, indent + 2, out);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        out.push_str(&format!("{pad}{k}:\n"));
                        yaml(v, indent + 2, out);
                    }
                    _ => out.push_str(&format!("{pad}{k}: {v}\n")),
                }
            }
        }
        Value::Array(list) => {
            for item in list {
                match item {
                    Value::Object(m) if !m.is_empty() => {
                        // The first field on the dash line, the rest aligned under it.
                        let mut inner = String::new();
                        yaml(item, indent + 2, &mut inner);
                        out.push_str(&format!("{pad}- {}", &inner[indent + 2..]));
                    }
                    _ => out.push_str(&format!("{pad}- {item}\n")),
                }
            }
        }
        _ => out.push_str(&format!("{pad}{v}\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_allows_exactly_the_read_only_tools_and_names_every_skill() {
        let agent = agent();
        let allowed = agent["permissions"][0]["match"].as_array().unwrap();
        let read_only = tools().iter().filter(|t| t.read_only()).count();
        assert_eq!(allowed.len(), read_only);
        for entry in allowed {
            let name = entry
                .as_str()
                .unwrap()
                .strip_prefix("instantstart/")
                .unwrap();
            assert!(
                super::super::catalog::tool(name).unwrap().read_only(),
                "{name}"
            );
        }
        assert_eq!(agent["permissions"][0]["effect"], "allow");
        assert_eq!(
            agent["permissions"].as_array().unwrap().len(),
            1,
            "no wildcard rule: the rest ask"
        );
        for (name, _) in SKILLS {
            assert!(agent["resources"]
                .as_array()
                .unwrap()
                .contains(&json!(format!("skill://{name}"))));
        }
        for v2_field in ["allowedTools", "toolsSettings"] {
            assert!(
                agent.get(v2_field).is_none(),
                "{v2_field} is the 2.x format"
            );
        }
    }

    /// The review of approvals against text that workloads write: what runs without asking
    /// only reads (inside the account and its clusters, nowhere else); a tool that relays
    /// workload text and acts (invoking a model) always asks, so an instruction planted in a
    /// log line or a model's answer cannot run anything without the person's yes.
    #[test]
    fn nothing_that_relays_workload_text_and_acts_runs_without_asking() {
        let agent = agent();
        let allowed: Vec<&str> = agent["permissions"][0]["match"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e.as_str()?.strip_prefix("instantstart/"))
            .collect();
        for (tool, _) in super::super::UNTRUSTED {
            let spec = super::super::catalog::tool(tool).unwrap();
            assert_eq!(
                allowed.contains(tool),
                spec.read_only(),
                "{tool}: auto-approved exactly when it only reads"
            );
        }
        assert!(!allowed.contains(&"endpoint_invoke"));
        assert!(allowed.contains(&"workload_logs"));
        for name in &allowed {
            let spec = super::super::catalog::tool(name).unwrap();
            assert!(!spec.destructive, "{name} is destructive and auto-approved");
        }
    }

    #[test]
    fn the_markdown_profile_is_front_matter_then_the_prompt() {
        let text = profile();
        let rest = text.strip_prefix("---\n").unwrap();
        let (head, body) = rest.split_once("\n---\n").unwrap();
        assert_eq!(body, AGENT_PROMPT);
        assert!(
            head.contains(
                "\nmcpServers:\n  instantstart:\n    url: \"http://localhost:3099/mcp\"\n"
            ),
            "{head}"
        );
        assert!(head.contains("\npermissions:\n  - capability: \"mcp\"\n    effect: \"allow\"\n    match:\n      - \"instantstart/"), "{head}");
        assert!(
            head.contains("\nresources:\n  - \"skill://create-cluster-pipeline\"\n"),
            "{head}"
        );
    }
}
