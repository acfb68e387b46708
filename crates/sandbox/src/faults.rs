//! Fault injection for the sandbox: `eks:CreateCluster=1,sagemaker:CreateCluster=2,throttle=0.2`,
//! actions the server's own role is denied: `deny=eks:CreateAddon`, and bucket names another
//! account holds: `foreign-bucket=sagemaker-instantstart-demo-000000000000`, and role names a
//! customer's own role already has: `foreign-role=demo-eks-cluster`.

use std::collections::BTreeMap;

use cloud::CloudError;

use super::split_api;

/// Which calls the sandbox refuses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// API → how many of its next calls fail.
    remaining: BTreeMap<String, u32>,
    /// Fraction of all calls answered with a throttling error.
    throttle: f64,
    /// Actions the server's own role is denied (`deny=eks:CreateAddon`, repeatable): every call
    /// of one is refused with AccessDenied, and the doctor finds it denied.
    denied: std::collections::BTreeSet<String>,
    /// Bucket names another account holds (`foreign-bucket=<name>`, repeatable): S3 answers
    /// the expected-owner check with 403 and refuses to create one (`BucketAlreadyExists`).
    foreign_buckets: std::collections::BTreeSet<String>,
    /// Role names a role of the customer's already has (`foreign-role=<name>`, repeatable): at
    /// the root path, without the product's tag, as an administrator made it.
    foreign_roles: std::collections::BTreeSet<String>,
}

impl Faults {
    /// Parses the `INSTANTSTART_SANDBOX_FAULTS` syntax.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut faults = Faults::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| {
                format!("`{item}`: expected `service:Operation=N` or `throttle=F`")
            })?;
            let key = key.trim();
            let value = value.trim();
            if key == "deny" {
                if !value.contains(':') {
                    return Err(format!(
                        "`{item}`: deny takes an action, `service:Operation`"
                    ));
                }
                faults.denied.insert(value.to_string());
            } else if key == "foreign-role" {
                if value.is_empty() || value.len() > 64 {
                    return Err(format!("`{item}`: foreign-role takes a role name"));
                }
                faults.foreign_roles.insert(value.to_string());
            } else if key == "foreign-bucket" {
                let valid = (3..=63).contains(&value.len())
                    && value.bytes().all(|b| {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b)
                    });
                if !valid {
                    return Err(format!("`{item}`: foreign-bucket takes a bucket name"));
                }
                faults.foreign_buckets.insert(value.to_string());
            } else if key == "throttle" {
                let f: f64 = value
                    .parse()
                    .map_err(|_| format!("`{item}`: throttle takes a fraction between 0 and 1"))?;
                if !(0.0..=1.0).contains(&f) {
                    return Err(format!(
                        "`{item}`: throttle takes a fraction between 0 and 1"
                    ));
                }
                faults.throttle = f;
            } else {
                let (service, op) = key
                    .split_once(':')
                    .ok_or_else(|| format!("`{item}`: expected `service:Operation=N`"))?;
                if service.is_empty() || op.is_empty() {
                    return Err(format!("`{item}`: expected `service:Operation=N`"));
                }
                let n: u32 = value
                    .parse()
                    .map_err(|_| format!("`{item}`: N must be a whole number"))?;
                faults.remaining.insert(key.to_string(), n);
            }
        }
        Ok(faults)
    }

    /// The actions the server's own role is denied.
    pub fn denied(&self) -> &std::collections::BTreeSet<String> {
        &self.denied
    }

    /// Whether a customer's role has the name.
    pub fn foreign_role(&self, name: &str) -> bool {
        self.foreign_roles.contains(name)
    }

    /// Whether another account holds the bucket name.
    pub fn foreign_bucket(&self, bucket: &str) -> bool {
        self.foreign_buckets.contains(bucket)
    }

    /// Takes one remaining fault of `api`, if any is left (e.g. `sagemaker:LifecycleScriptFailure=2`:
    /// the next two clusters' lifecycle scripts fail).
    pub fn take_one(&mut self, api: &str) -> bool {
        match self.remaining.get_mut(api) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// Takes every remaining fault of `api` at once (e.g. `k8s:PodFailure=2`: the next training
    /// job applied loses a pod twice).
    pub fn take(&mut self, api: &str) -> u32 {
        self.remaining.remove(api).unwrap_or(0)
    }

    /// Decides whether this call is refused; `roll` is a uniform sample in `[0, 1)`.
    pub fn check(&mut self, api: &str, roll: f64) -> Option<CloudError> {
        let (service, op) = split_api(api);
        if self.denied.contains(api) {
            return Some(CloudError::new(
                service,
                op,
                "AccessDenied",
                format!("User: arn:aws:sts::{}:assumed-role/instantstart/sandbox is not authorized to perform: {api}", super::ACCOUNT),
            ));
        }
        if let Some(n) = self.remaining.get_mut(api) {
            if *n > 0 {
                *n -= 1;
                return Some(injected(service, op));
            }
        }
        if roll < self.throttle {
            let code = if service == "s3" {
                "SlowDown"
            } else {
                "ThrottlingException"
            };
            return Some(CloudError::new(service, op, code, "Rate exceeded").retryable());
        }
        None
    }
}

/// A realistic, non-retryable refusal for each service.
fn injected(service: &str, op: &str) -> CloudError {
    let (code, message) = match service {
        "sagemaker" => (
            "ResourceLimitExceeded",
            "The account-level service limit for cluster usage has been exceeded",
        ),
        "eks" => (
            "UnsupportedAvailabilityZoneException",
            "Cannot create cluster because the targeted availability zone does not currently have sufficient capacity",
        ),
        "ec2" => ("VpcLimitExceeded", "The maximum number of VPCs has been reached."),
        "iam" => ("LimitExceeded", "Cannot exceed quota for RolesPerAccount"),
        "s3" => ("TooManyBuckets", "You have attempted to create more buckets than allowed"),
        _ => ("InternalError", "Injected failure"),
    };
    CloudError::new(service, op, code, format!("{message} (injected fault)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denied_action_is_refused_every_time_as_access_denied() {
        let mut f = Faults::parse("deny=eks:CreateAddon").unwrap();
        for _ in 0..3 {
            let e = f.check("eks:CreateAddon", 0.9).unwrap();
            assert_eq!(e.code, "AccessDenied");
            assert!(!e.retryable);
        }
        assert!(f.check("eks:DescribeAddon", 0.9).is_none());
        assert!(Faults::parse("deny=CreateAddon").is_err());
    }

    #[test]
    fn named_faults_fail_exactly_n_times_then_pass() {
        let mut f = Faults::parse("eks:CreateCluster=2").unwrap();
        assert!(f.check("eks:CreateCluster", 0.9).is_some());
        let err = f.check("eks:CreateCluster", 0.9).unwrap();
        assert!(!err.retryable);
        assert!(f.check("eks:CreateCluster", 0.9).is_none());
        assert!(f.check("sagemaker:CreateCluster", 0.9).is_none());
    }

    #[test]
    fn throttle_refuses_the_given_fraction_with_a_retryable_error() {
        let mut f = Faults::parse("throttle=0.2").unwrap();
        assert!(f.check("ec2:CreateVpc", 0.1).unwrap().retryable);
        assert!(f.check("ec2:CreateVpc", 0.3).is_none());
    }

    #[test]
    fn malformed_specs_are_refused_with_the_offending_item() {
        for bad in [
            "eks=1",
            "throttle=2",
            "eks:CreateCluster=x",
            ":X=1",
            "nothing",
        ] {
            let err = Faults::parse(bad).unwrap_err();
            assert!(err.contains('`'), "{bad}: {err}");
        }
        assert_eq!(Faults::parse("").unwrap(), Faults::default());
    }
}
