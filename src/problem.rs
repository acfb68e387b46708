//! Every problem type the API answers with, in one list: its slug (the suffix of the problem's
//! `type`, stable), its HTTP status and what to do about it. An error names its type by this
//! enum, never by a loose string, and the troubleshooting page's table is generated from the
//! list (`tests/api/docs.rs` fails when the page and the list differ).

/// The prefix of every problem `type`; the suffix is [`ProblemType::slug`].
pub const PROBLEM_TYPE_PREFIX: &str = "urn:instantstart:problem:";

macro_rules! problem_types {
    ($($variant:ident = $slug:literal, $status:literal, $todo:literal;)*) => {
        /// A problem type of the API (`urn:instantstart:problem:<slug>`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ProblemType {
            $($variant,)*
        }

        impl ProblemType {
            /// Every type, in the troubleshooting page's order.
            pub const ALL: &'static [ProblemType] = &[$(ProblemType::$variant,)*];

            /// The stable suffix of the problem's `type`.
            pub fn slug(self) -> &'static str {
                match self {
                    $(ProblemType::$variant => $slug,)*
                }
            }

            /// The HTTP status it is answered with (a few read `502 / 503`).
            pub fn status(self) -> &'static str {
                match self {
                    $(ProblemType::$variant => $status,)*
                }
            }

            /// What the caller does next, as the troubleshooting page says it.
            pub fn what_to_do(self) -> &'static str {
                match self {
                    $(ProblemType::$variant => $todo,)*
                }
            }
        }
    };
}

problem_types! {
    Validation = "validation", "422",
        "fix the named `field`; `hint` has the valid values";
    MissingField = "missing-field", "400",
        "fix the named `field`; `hint` has the valid values";
    UnknownField = "unknown-field", "400",
        "fix the named `field`; `hint` has the valid values";
    InvalidType = "invalid-type", "400",
        "fix the named `field`; `hint` has the valid values";
    MalformedJson = "malformed-json", "400",
        "fix the named `field`; `hint` has the valid values";
    NotFound = "not-found", "404",
        "`hint` says where the list is";
    PayloadTooLarge = "payload-too-large", "413",
        "a request body (REST or MCP) is held to 64 KiB: send less at once";
    ClusterExists = "cluster-exists", "409",
        "pick another name, or use the existing one";
    ClaimExists = "claim-exists", "409",
        "pick another name, or use the existing one";
    EndpointExists = "endpoint-exists", "409",
        "pick another name, or use the existing one";
    SpaceExists = "space-exists", "409",
        "pick another name, or use the existing one";
    HyperpodExists = "hyperpod-exists", "409",
        "pick another name, or use the existing one";
    Conflict = "conflict", "409",
        "another operation on the same resource runs: wait for `operationId`";
    StageNotReady = "stage-not-ready", "409",
        "run the stage named in `detail` first";
    IdempotencyKeyReused = "idempotency-key-reused", "409",
        "the key was used for another request body";
    NotRetryable = "not-retryable", "409",
        "only a failed operation can be retried";
    AlreadyFinished = "already-finished", "409",
        "only a failed operation can be retried";
    InferenceOperatorMissing = "inference-operator-missing", "409",
        "enable the `inferenceOperator` feature";
    SpacesMissing = "spaces-missing", "409",
        "enable `ebsCsi` and `spaces` (one request)";
    SpaceStorageFixed = "space-storage-fixed", "409",
        "a space's home keeps its size: make a new space";
    SpaceConnectionRefused = "space-connection-refused", "409",
        "the Spaces add-on refused that connection (its web UI not set up, an IDE type it lacks): open the space through the control plane (`…/open`)";
    RoutingImmutable = "routing-immutable", "409",
        "routing is fixed for an endpoint's life: make a new endpoint";
    TooManyLogStreams = "too-many-log-streams", "429",
        "close a log follow, or raise `--max-log-follows`";
    TooManyLogReads = "too-many-log-reads", "429",
        "16 log snapshots are being read at once: try again in a moment";
    TooManyEventStreams = "too-many-event-streams", "429",
        "close another browser tab of this control plane";
    TooManyWaiters = "too-many-waiters", "429",
        "poll without `?wait`, or retry when another long-poll ends";
    TooManySpaceConnections = "too-many-space-connections", "429",
        "close a space's tab, or retry in a moment: idle connections to spaces close after 30 seconds";
    TooManyMcpSessions = "too-many-mcp-sessions", "429",
        "end an unused session (`DELETE /mcp`), or wait five minutes for idle ones to end";
    JobExists = "job-exists", "409",
        "pick another name, or delete the existing one first (`detail` names it)";
    TeamExists = "team-exists", "409",
        "pick another name, or delete the existing one first (`detail` names it)";
    NameTaken = "name-taken", "409",
        "pick another name, or delete the existing one first (`detail` names it)";
    DownloadExists = "download-exists", "409",
        "pick another name, or delete the existing one first (`detail` names it)";
    SecretExists = "secret-exists", "409",
        "a Secret of that name exists and is not the workload's: it is never overwritten; delete or rename it, or name the workload otherwise";
    FeaturePrerequisite = "feature-prerequisite", "409",
        "the feature needs another add-on `ACTIVE` first: `detail` says which and how";
    TrainingOperatorMissing = "training-operator-missing", "409",
        "the recipe's runtime is not on the cluster: enable `trainingOperator`, or run the dependency stage, then submit again";
    KuberayMissing = "kuberay-missing", "409",
        "the recipe's runtime is not on the cluster: enable `trainingOperator`, or run the dependency stage, then submit again";
    LoadBalancerControllerMissing = "load-balancer-controller-missing", "409",
        "an external load balancer needs the AWS Load Balancer Controller: enable the inference operator";
    StorageMissing = "storage-missing", "409",
        "training pods mount the cluster's S3 claim at `/s3`: create it with `storage_setup`, then submit again";
    ClaimSharedByTeams = "claim-shared-by-teams", "409",
        "teams' namespaces mount copies of the claim: delete those copies first";
    NotS3 = "not-s3", "409",
        "the claim is an FSx for Lustre volume: look into it from a pod";
    NotManaged = "not-managed", "409",
        "the job was made outside this control plane: it is shown, never deleted from here";
    GroupAutoscaled = "group-autoscaled", "409",
        "managed autoscaling governs the group: take it out of `managedAutoscalingInstanceGroups` first";
    LastInstanceGroup = "last-instance-group", "409",
        "a cluster keeps at least one group: delete the cluster instead";
    DeploymentNotReady = "deployment-not-ready", "409",
        "nothing ready serves yet: wait for its operation (`operation_get`)";
    EndpointNotReady = "endpoint-not-ready", "409",
        "nothing ready serves yet: wait for its operation (`operation_get`)";
    PodNotReady = "pod-not-ready", "409",
        "nothing ready serves yet: wait for its operation (`operation_get`)";
    EndpointPathUnsafe = "endpoint-path-unsafe", "409",
        "the endpoint's invocation path read from the cluster is not a plain path: redeploy it with a valid `invocationPath`";
    PoolPodsAssigned = "pool-pods-assigned", "409",
        "the pool's pods serve models: unassign them, or shrink the pool no further than `detail` says";
    SpaceNotRunning = "space-not-running", "409",
        "start the space (`space_start`), then open it again; a running space whose own pod is not up yet says so";
    SpaceRemoteAccessUnsupported = "space-remote-access-unsupported", "409",
        "a remote IDE needs the Spaces add-on's remote access, which this control plane does not set up: open the space through it (`…/open`)";
    SpaceUnreadable = "space-unreadable", "409",
        "the space was changed outside this control plane: change it where it was changed";
    InvalidHeader = "invalid-header", "400",
        "fix the named header: an actor this server knows, a JSON body";
    UnsupportedMediaType = "unsupported-media-type", "400",
        "fix the named header: an actor this server knows, a JSON body";
    WebsocketRequired = "websocket-required", "400",
        "the path follows logs over a WebSocket: open one, or read a snapshot with `GET …/logs`";
    Unauthorized = "unauthorized", "401",
        "send `Authorization: Bearer <token>`";
    SignInRequired = "sign-in-required", "401",
        "sign in: post `aws eks get-token --cluster-name <deployment> --query status.token --output text` to `POST /api/session` (the sign-in page shows the command), or send an agent token as `Authorization: Bearer`";
    SignInRefused = "sign-in-refused", "401",
        "make a new token with the same command: a token is good once, for 15 minutes, for this deployment only";
    AccessDenied = "access-denied", "403",
        "ask one of the administrators `hint` names for the right `detail` names";
    IdentitiesOff = "identities-off", "409",
        "the server runs in local single-user mode: start it with `--identity iam` for people to sign in";
    LastAdmin = "last-admin", "409",
        "add another administrator first: the deployment keeps at least one";
    ForbiddenHost = "forbidden-host", "403",
        "add the name to `--allowed-host` (a port-forward on another port)";
    ForbiddenOrigin = "forbidden-origin", "403",
        "add the name to `--allowed-host` (a port-forward on another port)";
    WritesDisabled = "writes-disabled", "403",
        "the server runs `--mcp-read-only`";
    CloudError = "cloud-error", "502 / 503",
        "AWS refused or is unreachable: `detail` has its message";
    Internal = "internal", "500",
        "a bug: find the correlation id in the server log";
}

impl ProblemType {
    /// The full `type` URI.
    pub fn uri(self) -> String {
        format!("{PROBLEM_TYPE_PREFIX}{}", self.slug())
    }

    /// The troubleshooting page's table: consecutive types that share their status and next
    /// step share a row.
    pub fn table() -> String {
        let mut out = String::from("| slug | status | what to do |\n|---|---|---|\n");
        let mut i = 0;
        while i < Self::ALL.len() {
            let first = Self::ALL[i];
            let mut slugs = vec![format!("`{}`", first.slug())];
            i += 1;
            while i < Self::ALL.len()
                && Self::ALL[i].status() == first.status()
                && Self::ALL[i].what_to_do() == first.what_to_do()
            {
                slugs.push(format!("`{}`", Self::ALL[i].slug()));
                i += 1;
            }
            out.push_str(&format!(
                "| {} | {} | {} |\n",
                slugs.join(", "),
                first.status(),
                first.what_to_do()
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::ProblemType;

    #[test]
    fn every_slug_is_a_distinct_dns_label() {
        let mut seen = std::collections::BTreeSet::new();
        for t in ProblemType::ALL {
            let s = t.slug();
            assert!(
                !s.is_empty()
                    && s.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{s}"
            );
            assert!(seen.insert(s), "{s} twice");
            assert!(!t.what_to_do().is_empty(), "{s} says what to do");
        }
    }
}
