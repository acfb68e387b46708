//! The tool catalog: one entry per REST operation. A test walks the OpenAPI document and fails
//! on any operation without a tool here (or an explicit exclusion).

/// One MCP tool = one REST operation.
#[derive(Debug)]
pub struct ToolSpec {
    /// `area_verb`, snake_case.
    pub name: &'static str,
    pub method: &'static str,
    /// The OpenAPI path template.
    pub path: &'static str,
    pub description: &'static str,
    /// Path parameters (names as in the template).
    pub path_params: &'static [&'static str],
    /// Query parameters (REST names).
    pub query_params: &'static [&'static str],
    /// Whether the REST operation takes a JSON body (its fields become tool arguments).
    pub body: bool,
    /// Deletes or stops something that cannot simply be recreated.
    pub destructive: bool,
    /// Reaches the cloud account (AWS or the clusters), not only this control plane's state.
    pub open_world: bool,
    /// How long the operation it starts usually takes.
    pub duration: Option<&'static str>,
    /// (tool argument, REST name) where they differ.
    pub renames: &'static [(&'static str, &'static str)],
}

/// The parameter names of a spec.
pub struct Params {
    pub path: Vec<String>,
    pub query: Vec<String>,
}

impl ToolSpec {
    pub fn read_only(&self) -> bool {
        self.method == "GET"
    }

    /// GET, PUT and DELETE are idempotent by HTTP semantics; our POSTs become so only with an
    /// `idempotency_key`.
    pub fn idempotent(&self) -> bool {
        matches!(self.method, "GET" | "PUT" | "DELETE")
    }

    pub fn has_body(&self) -> bool {
        self.body
    }

    pub fn params(&self) -> Params {
        Params {
            path: self.path_params.iter().map(|s| s.to_string()).collect(),
            query: self.query_params.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// The tool argument name for a REST parameter.
    pub fn rename_arg<'a>(&self, rest: &'a str) -> &'a str {
        self.renames
            .iter()
            .find(|(_, r)| *r == rest)
            .map(|(a, _)| *a)
            .unwrap_or(rest)
    }

    /// The REST parameter name for a tool argument.
    pub fn rest_name(&self, arg: &str) -> String {
        self.renames
            .iter()
            .find(|(a, _)| *a == arg)
            .map(|(_, r)| r.to_string())
            .unwrap_or_else(|| arg.to_string())
    }

    /// The description with the status contract spelled out for mutating tools.
    pub fn full_description(&self) -> String {
        match self.duration {
            Some(d) => format!(
                "{} Starts a durable operation (usually {d}); the result carries operation_id. Completion is decided by operation_get: call it with wait_seconds until state is succeeded, failed or cancelled.",
                self.description
            ),
            None => self.description.to_string(),
        }
    }
}

const fn read(name: &'static str, path: &'static str, description: &'static str) -> ToolSpec {
    ToolSpec {
        name,
        method: "GET",
        path,
        description,
        path_params: &[],
        query_params: &[],
        body: false,
        destructive: false,
        open_world: false,
        duration: None,
        renames: &[],
    }
}

/// Every tool.
pub const CATALOG: &[ToolSpec] = &[
    read("health_get", "/healthz", "Server health: which cloud (aws or sandbox), region, and any reason the cloud cannot be used."),
    ToolSpec {
        open_world: true,
        ..read("identity_get", "/api/aws/identity", "The AWS account, IAM principal and region this control plane acts in (sandbox: the simulated account).")
    },
    ToolSpec {
        open_world: true,
        ..read("zone_list", "/api/aws/zones", "Availability Zones of the region (name and zone id). Call before asking the user for a zone.")
    },
    ToolSpec {
        open_world: true,
        query_params: &["zone"],
        ..read("instance_type_list", "/api/aws/instance-types", "Accelerated SageMaker instance types offered in one Availability Zone. Call before offering instance types.")
    },
    ToolSpec {
        open_world: true,
        query_params: &["instanceType", "count", "capacityType"],
        renames: &[("instance_type", "instanceType"), ("capacity_type", "capacityType")],
        ..read("preflight_get", "/api/aws/preflight", "Before the first cluster: caller identity, HyperPod cluster-usage quota for an instance type and count, training plans, and advice.")
    },
    read("cluster_list", "/api/clusters", "Every cluster with the latest operation of each stage. Call first: never create what already exists."),
    ToolSpec {
        path_params: &["name"],
        ..read("cluster_get", "/api/clusters/{name}", "One cluster: its stages (cluster, dependencies, hyperpod, storage), their operations and phases, and the resources recorded.")
    },
    ToolSpec {
        method: "POST",
        body: true,
        open_world: true,
        duration: Some("10-15 minutes on AWS"),
        ..read("cluster_create", "/api/clusters", "Create the network (VPC, subnets, NAT, security groups, S3 endpoint) and the EKS control plane. CIDRs are computed: do not ask the user for them.")
    },
    ToolSpec {
        method: "DELETE",
        path_params: &["name"],
        destructive: true,
        open_world: true,
        duration: Some("15-25 minutes on AWS"),
        ..read("cluster_delete", "/api/clusters/{name}", "Delete a cluster: HyperPod, EKS, network and roles. The shared S3 bucket is kept. Ask the user to confirm first.")
    },
    ToolSpec {
        method: "POST",
        body: true,
        open_world: true,
        duration: Some("under a minute"),
        ..read("cluster_import", "/api/clusters/import", "Adopt an existing EKS cluster (and optionally its HyperPod cluster): records its endpoint, adds an access entry for this control plane if missing, and records which dependencies are already installed (those are never changed unless dependencies_install is called with manageExisting).")
    },
    ToolSpec {
        method: "POST",
        path_params: &["name"],
        body: true,
        open_world: true,
        duration: Some("3-5 minutes on AWS"),
        ..read("dependencies_install", "/api/clusters/{name}/dependencies", "Reconcile the add-ons and in-cluster components HyperPod needs, in dependency order: reads each component and changes only what differs (safe to re-run). Needs the cluster stage to have succeeded; dependencies_get shows per-component state.")
    },
    ToolSpec {
        method: "POST",
        path_params: &["name"],
        body: true,
        open_world: true,
        duration: Some("15-25 minutes on AWS"),
        ..read("hyperpod_create", "/api/clusters/{name}/hyperpod", "Create the HyperPod cluster (node recovery Automatic) with its first instance group in the chosen zone. Ask only for zone, instance type, count and capacity type.")
    },
    ToolSpec {
        method: "POST",
        path_params: &["name"],
        body: true,
        open_world: true,
        duration: Some("1-2 minutes on AWS"),
        ..read("storage_setup", "/api/clusters/{name}/storage", "Create a storage claim: with no arguments the shared S3 bucket as `s3-claim` (mounted at /s3 by workloads); or another S3 bucket, or an existing FSx for Lustre file system (kind `fsx`). Claim names are unique per namespace.")
    },
    ToolSpec {
        path_params: &["name"],
        open_world: true,
        ..read("storage_list", "/api/clusters/{name}/storage", "The storage claims InstantStart made on the cluster: claim, namespace, S3 bucket or FSx file system, capacity, phase.")
    },
    ToolSpec {
        method: "DELETE",
        path_params: &["name", "claim"],
        query_params: &["namespace"],
        destructive: true,
        open_world: true,
        duration: Some("under a minute"),
        ..read("storage_delete", "/api/clusters/{name}/storage/{claim}", "Remove a storage claim and its volume from the cluster (the bucket or file system and its data stay). Pods using it keep it until they end. Confirm with the user.")
    },
    ToolSpec {
        path_params: &["name"],
        open_world: true,
        ..read("dependencies_get", "/api/clusters/{name}/dependencies", "Each dependency component's live state (pending, installing, ready, degraded, failed) with the reason. dependencies_install reconciles: it changes only what differs.")
    },
    ToolSpec {
        path_params: &["name"],
        open_world: true,
        ..read("cluster_status", "/api/clusters/{name}/status", "Live Kubernetes node state from a watch-backed cache: per node instance type, instance group, capacity type, readiness, GPUs total/allocatable/requested/free, health labels; plus pending GPU demand and the cache's age.")
    },
    ToolSpec {
        path_params: &["name"],
        open_world: true,
        ..read("features_get", "/api/clusters/{name}/features", "Managed features as they actually are (read from EKS, HyperPod, IAM and the cluster): training operator, inference operator, tiered checkpointing, managed autoscaling (HyperPod instance groups only, not general EC2), Container Insights, FSx CSI driver — enabled, state, reason, add-on, pod identity association, memory share, governed instance groups.")
    },
    ToolSpec {
        method: "PATCH",
        path_params: &["name"],
        body: true,
        destructive: true,
        open_world: true,
        duration: Some("2-5 minutes on AWS"),
        ..read("features_update", "/api/clusters/{name}/features", "Enable or disable managed features. Send only the fields to change (e.g. {\"trainingOperator\": true}); each field equal to the actual state is reported `unchanged` and nothing is done; each change starts its own operation. managedAutoscalingInstanceGroups picks the groups Karpenter governs (on-demand, no deep health checks). Disabling removes exactly what enabling made: confirm with the user.")
    },
    ToolSpec {
        path_params: &["name"],
        open_world: true,
        ..read("instance_group_list", "/api/clusters/{name}/instance-groups", "The cluster's HyperPod instance groups: type, capacity type and network interface (both fixed for the group's life), EFA support, target and current counts, subnets, lifecycle script.")
    },
    ToolSpec {
        method: "POST",
        path_params: &["name"],
        body: true,
        open_world: true,
        duration: Some("10-20 minutes on AWS"),
        ..read("instance_group_create", "/api/clusters/{name}/instance-groups", "Add an instance group: capacity type, network interface (standard or efa-only), zone (its compute subnet is placed by the control plane; with a training plan omit it, the plan's reservation decides) and count are decided once. Ask only for zone, instance type, count and capacity type.")
    },
    ToolSpec {
        method: "PATCH",
        path_params: &["name", "group"],
        body: true,
        open_world: true,
        duration: Some("5-20 minutes on AWS"),
        ..read("instance_group_update", "/api/clusters/{name}/instance-groups/{group}", "Change an instance group: send only what changes — instanceCount (0 only under managed autoscaling), deepHealthChecks (true runs InstanceStress and InstanceConnectivity on its new nodes), lifecycleOnCreate (a script already beside the current one). A request equal to the current state changes nothing; changing capacityType or networkInterface is refused (fixed for the group's life).")
    },
    ToolSpec {
        method: "DELETE",
        path_params: &["name", "group"],
        destructive: true,
        open_world: true,
        duration: Some("5-15 minutes on AWS"),
        ..read("instance_group_delete", "/api/clusters/{name}/instance-groups/{group}", "Remove a whole instance group: its nodes are terminated. Not the last group (delete the cluster instead). Confirm with the user.")
    },
    ToolSpec {
        path_params: &["name"],
        open_world: true,
        ..read("node_list", "/api/clusters/{name}/nodes", "The HyperPod nodes of a cluster with their status. For an unhealthy node escalate: investigate, then node_reboot, then node_replace.")
    },
    ToolSpec {
        method: "POST",
        path_params: &["name", "id"],
        open_world: true,
        duration: Some("2-5 minutes"),
        ..read("node_reboot", "/api/clusters/{name}/nodes/{id}/reboot", "Reboot one HyperPod node (after investigating). Watched until the node is Running again.")
    },
    ToolSpec {
        method: "POST",
        path_params: &["name", "id"],
        destructive: true,
        open_world: true,
        duration: Some("10-20 minutes"),
        ..read("node_replace", "/api/clusters/{name}/nodes/{id}/replace", "Replace one HyperPod node with a new instance: its local volumes are lost. Only after a reboot did not help; confirm with the user.")
    },
    ToolSpec {
        method: "POST",
        path_params: &["name", "id"],
        destructive: true,
        open_world: true,
        duration: Some("2-5 minutes"),
        ..read("node_delete", "/api/clusters/{name}/nodes/{id}/delete", "Remove one node from its instance group (the group shrinks by one). Confirm with the user.")
    },
    ToolSpec {
        method: "POST",
        path_params: &["name"],
        body: true,
        open_world: true,
        duration: Some("minutes to an hour, by model size"),
        ..read("model_download", "/api/clusters/{name}/models", "Download a Hugging Face model (modelId owner/name, optional revision) into a storage claim (default s3-claim, under models/<modelId>/) with an in-cluster job. A token for gated models goes to a Kubernetes Secret only. A model already downloaded (or downloading) is refused: see model_list.")
    },
    ToolSpec {
        path_params: &["name"],
        open_world: true,
        ..read("model_list", "/api/clusters/{name}/models", "Model downloads of a cluster: model id, revision, claim, path inside it, the job and its state (pending, succeeded, failed with the reason).")
    },
    ToolSpec {
        path_params: &["name"],
        open_world: true,
        ..read("job_list", "/api/clusters/{name}/jobs", "Jobs in namespace default: Kubernetes Jobs (model downloads among them), HyperPod PyTorch jobs and Ray jobs, with state and message, newest first.")
    },
    ToolSpec {
        method: "DELETE",
        path_params: &["name", "job"],
        query_params: &["kind"],
        destructive: true,
        open_world: true,
        duration: Some("under a minute"),
        ..read("job_delete", "/api/clusters/{name}/jobs/{job}", "Delete a job (kind job, pytorch or ray) and its pods; a model download's token Secret goes with it. Its logs go too: confirm with the user.")
    },
    ToolSpec {
        method: "POST",
        path_params: &["name"],
        body: true,
        open_world: true,
        duration: Some("5-20 minutes (image pull and model load)"),
        ..read("deployment_create", "/api/clusters/{name}/deployments", "Serve a model with your own container (default vllm/vllm-openai) as a Deployment and Service: args as a list (no shell), GPUs per replica, replicas, port, service cluster-ip (default) or load-balancer (internal to the VPC), optional instance type; the storage claim is mounted read-only at /s3. Ask only for the model, GPUs and replicas.")
    },
    ToolSpec {
        path_params: &["name"],
        open_world: true,
        ..read("deployment_list", "/api/clusters/{name}/deployments", "Inference deployments made here: image, replicas ready/wanted, state, service type and endpoint.")
    },
    ToolSpec {
        method: "DELETE",
        path_params: &["name", "deployment"],
        destructive: true,
        open_world: true,
        duration: Some("under a minute"),
        ..read("deployment_delete", "/api/clusters/{name}/deployments/{deployment}", "Stop serving: removes the deployment, its service and its token Secret. Confirm with the user.")
    },
    ToolSpec {
        method: "POST",
        path_params: &["name", "deployment"],
        body: true,
        open_world: true,
        ..read("deployment_invoke", "/api/clusters/{name}/deployments/{deployment}/invoke", "Smoke-test a ready deployment made here: one chat completion for a prompt, through the Kubernetes API server (never an arbitrary URL). Returns the server's answer as is.")
    },
    ToolSpec {
        method: "POST",
        path_params: &["name"],
        // Nodes are re-imaged: what lives only on their root volumes is lost.
        destructive: true,
        open_world: true,
        duration: Some("30-90 minutes on AWS (rolling, node by node)"),
        ..read("hyperpod_software_update", "/api/clusters/{name}/hyperpod/software-update", "Update every node of the HyperPod cluster to the latest HyperPod software (AMI), rolling. Nodes are re-imaged one batch at a time (running jobs are interrupted; data only on a node's root volume is lost): confirm with the user.")
    },
    ToolSpec {
        path_params: &["name", "claim"],
        query_params: &["prefix"],
        open_world: true,
        ..read("storage_objects_list", "/api/clusters/{name}/storage/{claim}/objects", "Keys in the bucket behind an S3 storage claim (at most 1000), optionally under a prefix such as models/.")
    },
    read("active_cluster_get", "/api/active-cluster", "The cluster used when a request names none."),
    ToolSpec {
        method: "PUT",
        body: true,
        ..read("active_cluster_set", "/api/active-cluster", "Choose the active cluster.")
    },
    ToolSpec {
        method: "POST",
        body: true,
        open_world: true,
        duration: Some("30-45 minutes on AWS"),
        ..read("pipeline_create", "/api/pipelines", "Create a whole cluster in one call: network + EKS, dependencies, HyperPod, storage, in order. A failed stage stops the pipeline; operation_retry resumes it.")
    },
    ToolSpec {
        query_params: &["cluster", "state", "limit"],
        ..read("operation_list", "/api/operations", "Operations, newest first, optionally for one cluster or in one state.")
    },
    ToolSpec {
        path_params: &["id"],
        query_params: &["wait"],
        renames: &[("wait_seconds", "wait")],
        ..read("operation_get", "/api/operations/{id}", "The status of an operation. Pass wait_seconds (up to 60) to wait for the next change instead of polling; repeat until state is succeeded, failed or cancelled. A failed operation names its phase, the cloud error and the retry tool.")
    },
    ToolSpec {
        method: "POST",
        path_params: &["id"],
        open_world: true,
        duration: Some("as long as the remaining phases"),
        ..read("operation_retry", "/api/operations/{id}/retry", "Resume a failed or cancelled operation: succeeded phases are kept and nothing is created twice.")
    },
    ToolSpec {
        method: "POST",
        path_params: &["id"],
        destructive: true,
        ..read("operation_cancel", "/api/operations/{id}/cancel", "Stop an operation at its next safe point (never in the middle of a cloud call). Resources already created stay.")
    },
    read("sandbox_calls_get", "/api/sandbox/calls", "Sandbox only: the count of every simulated mutating cloud call."),
    read("agent_config_get", "/api/agent/config", "The hypd-inst-agent configuration for Kiro CLI, its prompt, a generic MCP client configuration and the skills."),
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::collections::BTreeSet;

    /// REST operations deliberately without a tool.
    const EXCLUDED: &[(&str, &str)] = &[];

    /// Tools that delete or stop something.
    const DESTRUCTIVE: &[&str] = &[
        "cluster_delete",
        "operation_cancel",
        "node_replace",
        "node_delete",
        "instance_group_delete",
        "storage_delete",
        "features_update",
        "job_delete",
        "deployment_delete",
        "hyperpod_software_update",
    ];

    fn openapi() -> Value {
        serde_json::to_value(crate::api::openapi::document()).unwrap()
    }

    #[test]
    fn no_body_field_shadows_a_path_or_query_parameter() {
        // They share one flat tool input: a clash would silently send one value for both.
        let doc = openapi();
        for t in CATALOG.iter().filter(|t| t.body) {
            let op = &doc["paths"][t.path][t.method.to_ascii_lowercase()];
            let Some(reference) = op
                .pointer("/requestBody/content/application~1json/schema/$ref")
                .and_then(Value::as_str)
            else {
                continue;
            };
            let name = reference.rsplit('/').next().unwrap();
            let body = &doc["components"]["schemas"][name]["properties"];
            for p in t.path_params.iter().chain(t.query_params) {
                assert!(
                    body.get(t.rename_arg(p)).is_none(),
                    "{}: body field `{p}` shadows the parameter",
                    t.name
                );
            }
        }
    }

    #[test]
    fn every_rest_operation_has_exactly_one_tool_and_every_tool_a_route() {
        let doc = openapi();
        let mut operations = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                operations.insert((method.to_uppercase(), path.clone()));
            }
        }
        let tools: BTreeSet<_> = CATALOG
            .iter()
            .map(|t| (t.method.to_string(), t.path.to_string()))
            .collect();
        assert_eq!(tools.len(), CATALOG.len(), "two tools for one operation");
        for op in &operations {
            let excluded = EXCLUDED.iter().any(|(m, p)| *m == op.0 && *p == op.1);
            assert!(
                tools.contains(op) || excluded,
                "no tool for {} {}",
                op.0,
                op.1
            );
        }
        for t in &tools {
            assert!(
                operations.contains(t),
                "tool for a route that does not exist: {} {}",
                t.0,
                t.1
            );
        }
    }

    #[test]
    fn names_are_area_verb_snake_case_and_unique() {
        let mut seen = BTreeSet::new();
        for t in CATALOG {
            assert!(
                t.name.contains('_') && t.name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{}",
                t.name
            );
            assert!(seen.insert(t.name), "duplicate {}", t.name);
        }
    }

    #[test]
    fn annotations_follow_the_http_method_and_the_destructive_list() {
        for t in CATALOG {
            assert_eq!(t.read_only(), t.method == "GET", "{}", t.name);
            assert_eq!(t.destructive, DESTRUCTIVE.contains(&t.name), "{}", t.name);
            assert_eq!(
                t.idempotent(),
                matches!(t.method, "GET" | "PUT" | "DELETE"),
                "{}",
                t.name
            );
            // Every tool that starts an operation names its status tool and duration.
            let starts_operation = t.method != "GET"
                && !matches!(
                    t.name,
                    "active_cluster_set" | "operation_cancel" | "deployment_invoke"
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
            let spec = CATALOG.iter().find(|t| t.name == name).unwrap();
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
