//! The features' table and their IAM and add-on documents, checked as AWS documents them.

use super::*;
use serde_json::json;

#[test]
fn every_feature_kind_has_exactly_one_row_and_every_row_its_own_kind() {
    let feature_kinds: Vec<_> = OpKind::ALL
        .iter()
        .filter_map(|k| match k {
            OpKind::Feature(id) => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(feature_kinds.len(), FEATURES.len());
    for id in feature_kinds {
        assert_eq!(FEATURES.iter().filter(|f| f.id == id).count(), 1, "{id:?}");
        assert_eq!(of(id).unwrap().kind(), OpKind::Feature(id));
        // Every feature has phases both ways (the inference operator's disable needs the KEDA
        // component it hands back to).
        for enable in [true, false] {
            assert!(of(id).unwrap().steps(enable).is_some(), "{id:?} {enable}");
        }
    }
}

#[test]
fn the_autoscaling_role_may_only_add_and_delete_nodes_of_its_cluster() {
    let arn = "arn:aws:sagemaker:us-west-2:111122223333:cluster/abc123def456";
    let doc = autoscaling_policy(arn);
    let statements = doc["Statement"].as_array().unwrap();
    assert_eq!(statements.len(), 1);
    let s = &statements[0];
    assert_eq!(s["Effect"], "Allow");
    assert_eq!(
        s["Action"],
        json!([
            "sagemaker:BatchAddClusterNodes",
            "sagemaker:BatchDeleteClusterNodes"
        ])
    );
    assert_eq!(s["Resource"], json!([arn]));
    assert!(s.get("Condition").is_none());
}

#[test]
fn the_autoscaling_role_is_trusted_by_hyperpod_alone() {
    assert_eq!(
        autoscaling_trust(),
        json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
            "Principal": {"Service": "hyperpod.sagemaker.amazonaws.com"},
            "Action": ["sts:AssumeRole"]}]})
    );
    let own = &feature(AUTOSCALING).unwrap().own_roles[0];
    assert!(matches!(
        own.trust,
        Trust::Service("hyperpod.sagemaker.amazonaws.com")
    ));
}

/// The add-on's configuration, field by field as AWS documents it for
/// `amazon-sagemaker-hyperpod-inference`, and the roles it passes.
#[test]
fn the_inference_add_on_gets_the_documented_configuration_and_roles() {
    let f = feature("inferenceOperator").unwrap();
    let suffixes: Vec<&str> = f.own_roles.iter().map(|r| r.suffix).collect();
    assert_eq!(suffixes, [INFERENCE_EXEC, INFERENCE_KEDA, INFERENCE_ALB]);
    let inputs = AddonInputs {
        roles: f
            .own_roles
            .iter()
            .map(|r| (r.suffix, format!("arn:aws:iam::1:role/demo-{}", r.suffix)))
            .collect(),
        place: crate::service::storage::bucket::BucketPlace::whole("sagemaker-instantstart-demo-1"),
        hyperpod_cluster_arn: "arn:aws:sagemaker:us-west-2:1:cluster/abc".into(),
        workspace: None,
        amg_workspace: None,
    };
    let config = (f.configuration.unwrap())(&inputs);
    assert_eq!(
        config,
        json!({
            "executionRoleArn": "arn:aws:iam::1:role/demo-inference",
            "tlsCertificateS3Bucket": "sagemaker-instantstart-demo-1",
            "hyperpodClusterArn": "arn:aws:sagemaker:us-west-2:1:cluster/abc",
            "alb": {"serviceAccount": {"create": true, "roleArn": "arn:aws:iam::1:role/demo-inference-alb"}},
            "keda": {"auth": {"aws": {"irsa": {"roleArn": "arn:aws:iam::1:role/demo-inference-keda"}}}}
        })
    );
    // The execution role: trusted by SageMaker and exactly the controller's service
    // account, with AWS's managed policy for the operator.
    let exec = &f.own_roles[0];
    assert!(matches!(
        exec.trust,
        Trust::Irsa {
            namespace: "hyperpod-inference-system",
            service_account: "hyperpod-inference-controller-manager",
            sagemaker: true
        }
    ));
    assert_eq!(exec.managed, ["AmazonSageMakerHyperPodInferenceAccess"]);
    for (role, sa) in [
        (&f.own_roles[1], "keda-operator"),
        (&f.own_roles[2], "aws-load-balancer-controller"),
    ] {
        assert!(matches!(
            role.trust,
            Trust::Irsa { namespace: "hyperpod-inference-system", service_account, sagemaker: false }
                if service_account == sa
        ));
    }
    assert!(f.pod_identity.is_none(), "the inference operator uses IRSA");
    for req in [
        "cert-manager",
        "aws-mountpoint-s3-csi-driver",
        "aws-fsx-csi-driver",
        "metrics-server",
    ] {
        assert!(f.requires.contains(&req), "{req}");
    }
}

/// The training operator and the CloudWatch agent each get a role of their own with AWS's
/// managed policy for them, bound by pod identity, never the cluster's execution role.
#[test]
fn operators_get_their_own_roles_with_aws_managed_policies() {
    for (key, suffix, managed, sa) in [
        (
            "trainingOperator",
            "training-operator",
            "AmazonSageMakerHyperPodTrainingOperatorAccess",
            ("aws-hyperpod", "hp-training-operator-controller-manager"),
        ),
        (
            "containerInsights",
            "cloudwatch-agent",
            "CloudWatchAgentServerPolicy",
            ("amazon-cloudwatch", "cloudwatch-agent"),
        ),
    ] {
        let f = feature(key).unwrap();
        let own = &f.own_roles[0];
        assert_eq!(own.suffix, suffix);
        assert!(matches!(own.trust, Trust::PodIdentity));
        assert_eq!(own.managed, [managed]);
        assert_eq!(f.pod_identity, Some(sa));
        assert_ne!(
            own.name("demo"),
            crate::service::steps::hyperpod::execution_role_name("demo")
        );
    }
}

#[test]
fn the_inference_role_reads_only_its_bucket_and_its_cluster() {
    let arn = "arn:aws:sagemaker:us-west-2:111122223333:cluster/abc123def456";
    let own = crate::service::storage::bucket::BucketPlace::whole("sagemaker-instantstart-demo");
    let doc = inference_policy(&PolicyInputs {
        place: &own,
        cluster_arn: arn,
        workspace_arn: None,
    });
    for s in doc["Statement"].as_array().unwrap() {
        let actions: Vec<&str> = s["Action"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(actions.iter().all(|a| !a.contains('*')), "{s}");
        if actions
            .iter()
            .any(|a| a.starts_with("s3:Put") || a.starts_with("s3:Delete"))
        {
            assert_eq!(
                s["Resource"],
                json!([format!(
                    "arn:aws:s3:::sagemaker-instantstart-demo/{TLS_PREFIX}*"
                )]),
                "models are read, never written; only TLS certificates are: {s}"
            );
        }
        assert_ne!(s["Resource"], "*", "{s}");
        if actions.iter().any(|a| a.starts_with("sagemaker:")) {
            assert_eq!(s["Resource"], json!([arn]));
        }
        // Operator 3.0 tags its certificates: its own account and region's only.
        if actions.contains(&"acm:AddTagsToCertificate") {
            assert_eq!(
                s["Resource"],
                json!(["arn:aws:acm:us-west-2:111122223333:certificate/*"])
            );
        }
    }
    let text = doc.to_string();
    assert!(text.contains("s3:PutObjectTagging") && text.contains("acm:AddTagsToCertificate"));
}

#[test]
fn the_node_class_names_the_groups_and_the_pool_references_it() {
    let nc = node_class(&["workers".into()]);
    assert_eq!(nc["spec"]["instanceGroups"], json!(["workers"]));
    let pool = node_pool();
    let r = &pool["spec"]["template"]["spec"]["nodeClassRef"];
    assert_eq!(
        (r["group"].as_str(), r["kind"].as_str(), r["name"].as_str()),
        (
            Some(NODE_CLASS_GROUP),
            nc["kind"].as_str(),
            nc["metadata"]["name"].as_str()
        )
    );
}
