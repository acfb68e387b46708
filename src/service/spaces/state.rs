//! Where a space stands, read from the `Workspace` the controller writes: what the views show
//! and what an operation following a space waits for.

use serde_json::Value;

fn condition<'a>(o: &'a Value, kind: &str) -> Option<&'a Value> {
    o.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn holds(o: &Value, kind: &str) -> bool {
    condition(o, kind).is_some_and(|c| c["status"] == "True")
}

/// Where a space stands, and the controller's words for why when they matter.
pub fn space_state(o: &Value) -> (&'static str, Option<String>) {
    let message = |kind: &str| {
        condition(o, kind)
            .and_then(|c| c["message"].as_str())
            .filter(|m| !m.is_empty())
            .map(str::to_string)
    };
    if holds(o, "Degraded") {
        return ("failed", message("Degraded"));
    }
    let running = o.pointer("/spec/desiredStatus").and_then(Value::as_str) != Some("Stopped");
    match (running, holds(o, "Available"), holds(o, "Stopped")) {
        (true, true, _) => ("running", None),
        (true, false, _) => ("starting", message("Progressing").or(message("Available"))),
        (false, _, true) => ("stopped", None),
        (false, _, false) => ("stopping", message("Progressing")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_state_follows_the_controllers_conditions_and_the_desired_status() {
        let ws = |desired: &str, conditions: Value| json!({"spec": {"desiredStatus": desired}, "status": {"conditions": conditions}});
        let c = |t: &str, s: &str, m: &str| json!({"type": t, "status": s, "reason": "R", "message": m});
        assert_eq!(
            space_state(&ws(
                "Running",
                json!([
                    c("Available", "False", ""),
                    c("Progressing", "True", "waiting for compute")
                ])
            )),
            ("starting", Some("waiting for compute".into()))
        );
        assert_eq!(
            space_state(&ws("Running", json!([c("Available", "True", "")]))).0,
            "running"
        );
        assert_eq!(
            space_state(&ws("Stopped", json!([c("Available", "True", "")]))).0,
            "stopping"
        );
        assert_eq!(
            space_state(&ws("Stopped", json!([c("Stopped", "True", "")]))).0,
            "stopped"
        );
        assert_eq!(
            space_state(&ws(
                "Running",
                json!([c("Degraded", "True", "image pull failed")])
            )),
            ("failed", Some("image pull failed".into()))
        );
    }
}
