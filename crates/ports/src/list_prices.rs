//! A dated table of HyperPod's on-demand list prices (us-east-1): what a cost report falls back
//! on when the account's Price List cannot be read (every figure then an *estimate*, and said to
//! be one), and what the simulated account's Price List answers.

/// The date the table's figures were taken.
pub const AS_OF: &str = "2025-06-01";
/// The region they are for.
pub const REGION: &str = "us-east-1";

/// `(instance type, USD per instance-hour)`: SageMaker on-demand list prices, us-east-1.
const TABLE: &[(&str, f64)] = &[
    ("ml.p4d.24xlarge", 37.688),
    ("ml.p4de.24xlarge", 47.11),
    ("ml.p5.48xlarge", 113.068),
    ("ml.p5e.48xlarge", 124.37),
    ("ml.p5en.48xlarge", 124.37),
    ("ml.p6-b200.48xlarge", 137.0),
    ("ml.g5.xlarge", 1.408),
    ("ml.g5.2xlarge", 1.515),
    ("ml.g5.4xlarge", 2.03),
    ("ml.g5.8xlarge", 3.06),
    ("ml.g5.12xlarge", 7.09),
    ("ml.g5.16xlarge", 5.12),
    ("ml.g5.24xlarge", 10.18),
    ("ml.g5.48xlarge", 20.36),
    ("ml.g6.xlarge", 1.01),
    ("ml.g6.2xlarge", 1.222),
    ("ml.g6.4xlarge", 1.646),
    ("ml.g6.8xlarge", 2.492),
    ("ml.g6.12xlarge", 5.752),
    ("ml.g6.16xlarge", 4.184),
    ("ml.g6.24xlarge", 8.326),
    ("ml.g6.48xlarge", 16.653),
    ("ml.g6e.xlarge", 2.336),
    ("ml.g6e.2xlarge", 2.810),
    ("ml.g6e.4xlarge", 3.758),
    ("ml.g6e.8xlarge", 5.655),
    ("ml.g6e.12xlarge", 12.242),
    ("ml.g6e.16xlarge", 9.449),
    ("ml.g6e.24xlarge", 15.066),
    ("ml.g6e.48xlarge", 30.131),
    ("ml.trn1.32xlarge", 28.497),
    ("ml.trn1n.32xlarge", 32.77),
    ("ml.trn2.48xlarge", 55.0),
    ("ml.m5.large", 0.115),
    ("ml.m5.xlarge", 0.23),
    ("ml.m5.2xlarge", 0.461),
    ("ml.m5.4xlarge", 0.922),
    ("ml.m5.12xlarge", 2.765),
    ("ml.c5.xlarge", 0.204),
    ("ml.c5.2xlarge", 0.408),
    ("ml.c5.4xlarge", 0.816),
    ("ml.t3.medium", 0.05),
    ("ml.t3.large", 0.1),
    ("ml.t3.xlarge", 0.2),
];

/// The table's hourly price of an instance type (`ml.` prefix optional).
pub fn list_price(instance_type: &str) -> Option<f64> {
    let name = instance_type.trim_start_matches("ml.");
    TABLE
        .iter()
        .find(|(t, _)| t.strip_prefix("ml.") == Some(name))
        .map(|(_, p)| *p)
}

/// Every instance type of the table with its price.
pub fn table() -> impl Iterator<Item = (&'static str, f64)> {
    TABLE.iter().copied()
}
