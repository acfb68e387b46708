//! Custom resources checked against the real upstream CRD schemas (structural validation of
//! `spec.versions[].schema.openAPIV3Schema` with a JSON-schema validator).
//!
//! Not evaluated: CEL rules (`x-kubernetes-validations`), defaulting, `x-kubernetes-*` list/map
//! semantics and `int-or-string` beyond "no type". The schemas are read from
//! `INSTANTSTART_CRDS_DIR` (default `../shared/crds` beside the project); when that folder is
//! absent the tests say so and skip.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::{json, Value};

/// (apiVersion, kind) → openAPIV3Schema.
pub struct Schemas(HashMap<(String, String), Value>);

impl Schemas {
    pub fn load() -> Option<Self> {
        let dir = std::env::var_os("INSTANTSTART_CRDS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/crds"));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            println!(
                "SKIP: no CRD folder at {} (set INSTANTSTART_CRDS_DIR)",
                dir.display()
            );
            return None;
        };
        let mut map = HashMap::new();
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().and_then(|x| x.to_str()) != Some("yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read CRD");
            let crd: Value = serde_yaml::from_str(&text).expect("CRD YAML");
            let group = crd["spec"]["group"].as_str().unwrap().to_string();
            let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
            for v in crd["spec"]["versions"].as_array().unwrap() {
                let version = v["name"].as_str().unwrap();
                map.insert(
                    (format!("{group}/{version}"), kind.clone()),
                    v["schema"]["openAPIV3Schema"].clone(),
                );
            }
        }
        Some(Self(map))
    }

    /// Every way `cr` breaks its CRD's schema (empty when it conforms).
    pub fn errors(&self, cr: &Value) -> Vec<String> {
        let key = (
            cr["apiVersion"].as_str().unwrap_or_default().to_string(),
            cr["kind"].as_str().unwrap_or_default().to_string(),
        );
        let Some(schema) = self.0.get(&key) else {
            return vec![format!("no CRD serves {key:?}")];
        };
        let validator = jsonschema::draft7::new(schema).expect("schema compiles");
        validator
            .iter_errors(cr)
            .map(|e| format!("{}: {e}", e.instance_path))
            .collect()
    }
}

fn example(name: &str) -> Option<Value> {
    let dir = std::env::var_os("INSTANTSTART_CRDS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/crds"));
    let text = std::fs::read_to_string(dir.join("examples").join(name)).ok()?;
    serde_yaml::from_str(&text).ok()
}

#[test]
fn the_schema_check_accepts_upstream_examples_and_catches_wrong_types() {
    let Some(schemas) = Schemas::load() else {
        return;
    };
    let Some(good) = example("v1_s3_llama8b_IR_L1Cache.yaml") else {
        println!("SKIP: upstream examples missing");
        return;
    };
    assert_eq!(schemas.errors(&good), Vec::<String>::new());
    let mut bad = good.clone();
    bad["spec"]["replicas"] = json!("three");
    bad["spec"]["modelSourceConfig"]["modelSourceType"] = json!(42);
    let errors = schemas.errors(&bad);
    assert!(
        errors.iter().any(|e| e.starts_with("/spec/replicas:")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("/spec/modelSourceConfig/modelSourceType:")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .all(|e| e.starts_with("/spec/replicas:") || e.starts_with("/spec/modelSourceConfig/")),
        "{errors:?}"
    );
    let unknown = json!({"apiVersion": "example.com/v1", "kind": "Nope"});
    assert!(schemas.errors(&unknown)[0].contains("no CRD"));
}

#[test]
fn every_custom_resource_the_product_generates_conforms() {
    let Some(schemas) = Schemas::load() else {
        return;
    };
    // The managed-autoscaling NodePool is checked here; its HyperpodNodeClass has no public
    // CRD in the set (AWS documents its shape: spec.instanceGroups, at most 10), so the
    // unit test in features.rs holds it to that shape. Jobs, inference endpoints and scaled
    // objects join this list with the workloads that make them.
    use instantstart::service::steps::features;
    let pool = features::node_pool();
    assert_eq!(schemas.errors(&pool), Vec::<String>::new(), "{pool}");
    let generated = instantstart::service::steps::deps::COMPONENTS
        .iter()
        .filter_map(|c| match c.install {
            instantstart::service::steps::deps::Install::Manifests(f) => Some(f("us-west-2")),
            _ => None,
        })
        .flatten()
        .filter(|m| {
            let v = m["apiVersion"].as_str().unwrap_or_default();
            // Built-in API groups have no CRD.
            !(v == "v1"
                || v.starts_with("apps/")
                || v.starts_with("rbac.authorization.k8s.io/")
                || v.starts_with("apiregistration.k8s.io/"))
        });
    for cr in generated {
        assert_eq!(schemas.errors(&cr), Vec::<String>::new(), "{cr}");
    }
}
