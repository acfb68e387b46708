//! Every EKS add-on the product installs, held to how AWS's own set-up installs it
//! (`tests/fixtures/aws/addons.yaml`, each entry with its source): the same name, the same kind
//! of role (pod identity passed in the add-on, an IRSA role, or none) for the same service
//! account, AWS's managed policies, and no configuration key AWS does not use.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::deps::{Install, COMPONENTS};
use super::features::{AddonInputs, FEATURES};

/// The fixture's entries.
fn sources() -> Vec<Value> {
    let text = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/aws/addons.yaml"
    ));
    serde_yaml::from_str(text).expect("the add-on sources parse")
}

fn inputs(roles: &[&'static str]) -> AddonInputs {
    AddonInputs {
        roles: roles
            .iter()
            .map(|r| (*r, format!("arn:aws:iam::123456789012:role/demo-{r}")))
            .collect(),
        place: crate::service::storage::bucket::BucketPlace::whole("sagemaker-instantstart-demo"),
        hyperpod_cluster_arn: "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefghijkl"
            .into(),
        workspace: Some(crate::cloud::AmpWorkspace {
            id: "ws-1".into(),
            arn: "arn:aws:aps:us-west-2:123456789012:workspace/ws-1".into(),
            alias: None,
            status: "ACTIVE".into(),
            prometheus_endpoint: Some(
                "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1/".into(),
            ),
        }),
        amg_workspace: Some(
            json!({"arn": "arn:aws:grafana:us-west-2:123456789012:/workspaces/g-1"}),
        ),
    }
}

#[test]
fn every_addon_the_product_installs_has_an_aws_source() {
    let listed: BTreeSet<String> = sources()
        .iter()
        .map(|e| e["addon"].as_str().unwrap().to_string())
        .collect();
    for a in crate::service::cluster::versions::managed_addons() {
        assert!(
            listed.contains(a),
            "{a} is installed but tests/fixtures/aws/addons.yaml has no AWS source for it"
        );
    }
    for e in sources() {
        let source = e["source"].as_str().unwrap_or_default();
        assert!(
            source.starts_with("https://docs.aws.amazon.com/")
                || source
                    .split(' ')
                    .any(|w| w.len() == 40 && w.bytes().all(|b| b.is_ascii_hexdigit())),
            "{}: a source names its commit or AWS's guide page: {source}",
            e["addon"]
        );
    }
}

#[test]
fn each_addons_request_and_roles_match_its_aws_source() {
    for e in sources() {
        let name = e["addon"].as_str().unwrap();
        let component = COMPONENTS.iter().find(|c| c.name == name);
        let feature = FEATURES.iter().find(|f| f.addon == name);
        assert!(
            component.is_some() || feature.is_some(),
            "{name}: a source for an add-on the product does not install"
        );
        let irsa = matches!(
            component.map(|c| &c.install),
            Some(Install::Addon {
                s3_csi_role: true,
                ..
            })
        );
        let pod_identity = feature.and_then(|f| f.pod_identity);
        match e["role"].as_str().unwrap() {
            "none" => {
                assert!(!irsa, "{name}: AWS gives it no role");
                assert!(
                    pod_identity.is_none(),
                    "{name}: AWS binds no service account"
                );
                assert!(
                    feature.is_none_or(|f| f.own_roles.is_empty()),
                    "{name}: AWS makes it no role"
                );
            }
            "irsa" => assert!(
                irsa,
                "{name}: AWS passes a service-account role in the add-on"
            ),
            "pod-identity" => {
                let sa = e["serviceAccount"].as_str().unwrap();
                assert_eq!(
                    pod_identity.map(|p| p.1),
                    Some(sa),
                    "{name}: AWS binds {sa} by pod identity"
                );
            }
            "configuration" => assert!(
                feature.is_some_and(|f| f.configuration.is_some()),
                "{name}: AWS passes its roles in its configuration"
            ),
            other => panic!("{name}: unknown role kind {other}"),
        }
        if let Some(managed) = e["managedPolicies"].as_array() {
            let ours: Vec<&str> = feature
                .into_iter()
                .flat_map(|f| f.own_roles)
                .flat_map(|r| r.managed.iter().copied())
                .collect();
            for m in managed {
                let m = m.as_str().unwrap();
                assert!(
                    ours.contains(&m),
                    "{name}: AWS attaches {m}; ours: {ours:?}"
                );
            }
        }
        if let Some(actions) = e["inlineActions"].as_array() {
            let f = feature.unwrap();
            let place = crate::service::storage::bucket::BucketPlace::whole("b");
            let arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefghijkl";
            let docs: Vec<Value> = f
                .own_roles
                .iter()
                .filter_map(|r| r.policy)
                .map(|p| {
                    p(&super::features::PolicyInputs {
                        place: &place,
                        cluster_arn: arn,
                        workspace_arn: None,
                    })
                })
                .collect();
            let text = Value::Array(docs).to_string();
            for a in actions {
                let a = a.as_str().unwrap();
                assert!(
                    text.contains(a),
                    "{name}: AWS's guide grants {a}; ours: {text}"
                );
            }
        }
        if let Some(keys) = e["configurationKeys"].as_array() {
            let f = feature.expect("a configured add-on is a feature");
            let suffixes: Vec<&'static str> = f.own_roles.iter().map(|r| r.suffix).collect();
            let config = (f.configuration.unwrap())(&inputs(&suffixes));
            let allowed: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
            for k in config.as_object().unwrap().keys() {
                assert!(
                    allowed.contains(&k.as_str()),
                    "{name}: configuration key {k} is not one AWS uses: {allowed:?}"
                );
            }
        }
    }
}
