//! Tool input schemas, derived from the OpenAPI document: a tool's path and query parameters
//! plus its request body's fields, with the components they use as `$defs`, rewritten to the
//! subset of JSON Schema every model provider accepts (no `type` arrays, no null branches:
//! an optional field is simply not required).

use serde_json::{json, Map, Value};

use super::catalog::ToolSpec;

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
    let mut schema: Value = serde_json::from_str(&text).unwrap_or_default();
    portable(&mut schema);
    match schema {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Rewrites nullable forms into plain ones, everywhere in a schema:
/// `"type": ["string", "null"]` becomes `"type": "string"`, a `oneOf`/`anyOf` with a null
/// branch loses it (and is inlined when one branch is left), and `"nullable"` goes.
pub fn portable(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get("type") {
                let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                match kept.len() {
                    0 => {
                        map.remove("type");
                    }
                    1 => {
                        map.insert("type".into(), kept[0].clone());
                    }
                    // Several real types: one branch each, which every provider reads.
                    _ => {
                        map.remove("type");
                        let branches = kept.into_iter().map(|t| json!({ "type": t })).collect();
                        map.insert("anyOf".into(), Value::Array(branches));
                    }
                }
            }
            map.remove("nullable");
            for key in ["oneOf", "anyOf"] {
                let Some(Value::Array(branches)) = map.get_mut(key) else {
                    continue;
                };
                branches.retain(|b| b.get("type") != Some(&json!("null")));
                if branches.len() == 1 {
                    let only = branches.remove(0);
                    map.remove(key);
                    if let Value::Object(inner) = only {
                        for (k, v) in inner {
                            map.entry(k).or_insert(v);
                        }
                    }
                }
            }
            for child in map.values_mut() {
                portable(child);
            }
        }
        Value::Array(list) => list.iter_mut().for_each(portable),
        _ => {}
    }
}

/// Whether a schema still holds a form some providers refuse.
#[cfg(test)]
fn unportable(v: &Value) -> Option<String> {
    match v {
        Value::Object(map) => {
            if map.get("type").is_some_and(Value::is_array) {
                return Some(format!("type array in {v}"));
            }
            if map.get("type") == Some(&json!("null")) {
                return Some(format!("null type in {v}"));
            }
            map.values().find_map(unportable)
        }
        Value::Array(list) => list.iter().find_map(unportable),
        _ => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nullable_forms_become_plain_optional_ones() {
        let mut s = json!({"properties": {
            "a": {"type": ["string", "null"], "description": "d"},
            "b": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/X"}], "description": "e"},
            "c": {"type": ["integer", "string", "null"]},
            "d": {"type": "array", "items": {"type": ["number", "null"]}}
        }});
        portable(&mut s);
        assert_eq!(
            s["properties"]["a"],
            json!({"type": "string", "description": "d"})
        );
        assert_eq!(
            s["properties"]["b"],
            json!({"$ref": "#/$defs/X", "description": "e"})
        );
        assert_eq!(
            s["properties"]["c"],
            json!({"anyOf": [{"type": "integer"}, {"type": "string"}]})
        );
        assert_eq!(s["properties"]["d"]["items"], json!({"type": "number"}));
        assert_eq!(unportable(&s), None);
    }

    #[test]
    fn every_tool_schema_is_portable() {
        let doc = crate::api::openapi::document().clone();
        for spec in super::super::catalog::tools().iter() {
            let schema = Value::Object(input_schema(spec, &doc));
            assert_eq!(unportable(&schema), None, "{}", spec.name);
        }
    }
}
