//! Custom resources checked against the real upstream CRD schemas (structural validation of
//! `spec.versions[].schema.openAPIV3Schema` with a JSON-schema validator).
//!
//! Not evaluated: CEL rules (`x-kubernetes-validations`), defaulting, `x-kubernetes-*` list/map
//! semantics and `int-or-string` beyond "no type". The schemas are the repository's copies in
//! `tests/fixtures/crds` (see [`crate::helpers::crds_dir`]).

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::helpers::crds_dir;

/// (apiVersion, kind) → openAPIV3Schema.
pub struct Schemas(HashMap<(String, String), Value>);

impl Schemas {
    pub fn load() -> Self {
        let dir = crds_dir();
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("the CRD folder {}: {e}", dir.display()));
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
        assert!(!map.is_empty(), "no CRD in {}", dir.display());
        Self(map)
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

/// One of AWS's upstream example manifests (`examples/` of the CRD fixtures).
pub fn example(name: &str) -> Value {
    let path = crds_dir().join("examples").join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the example {}: {e}", path.display()));
    serde_yaml::from_str(&text).expect("example YAML")
}

#[test]
fn the_schema_check_accepts_upstream_examples_and_catches_wrong_types() {
    let schemas = Schemas::load();
    let good = example("v1_s3_llama8b_IR_L1Cache.yaml");
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
    let schemas = Schemas::load();
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

/// The fixtures are what their README says: every file listed once, each the upstream blob
/// (its sha256), and no row for a file that is not there.
#[test]
fn the_fixtures_are_the_upstream_files_listed_here() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/crds");
    let listed = crate::helpers::assert_provenance(&dir, &["", "examples/"], ".yaml");
    assert!(listed.len() >= 20, "{listed:?}");
}
