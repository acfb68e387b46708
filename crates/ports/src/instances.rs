//! Facts about the accelerated instance types HyperPod offers — GPUs, EFA, whether their
//! capacity is scarce (the p-families) — in one table that every caller reads: validation,
//! threads per core, the device plugins' node affinity, the sandbox's scheduler, preflight.

/// One instance type, by its EC2 name (HyperPod's is the same with `ml.` in front).
#[derive(Debug, Clone, Copy)]
pub struct InstanceFacts {
    pub name: &'static str,
    /// NVIDIA GPUs per instance (0 for Trainium).
    pub gpus: u32,
    /// Can carry an EFA interface.
    pub efa: bool,
    /// A p-family type: scarce on-demand capacity, two threads per core.
    pub high_end: bool,
}

const fn t(name: &'static str, gpus: u32, efa: bool, high_end: bool) -> InstanceFacts {
    InstanceFacts {
        name,
        gpus,
        efa,
        high_end,
    }
}

/// The table. EFA on the g-families only from 8xlarge up, as EC2 documents it.
pub static INSTANCE_TYPES: &[InstanceFacts] = &[
    t("p4d.24xlarge", 8, true, true),
    t("p4de.24xlarge", 8, true, true),
    t("p5.48xlarge", 8, true, true),
    t("p5e.48xlarge", 8, true, true),
    t("p5en.48xlarge", 8, true, true),
    t("p6-b200.48xlarge", 8, true, true),
    t("g5.xlarge", 1, false, false),
    t("g5.2xlarge", 1, false, false),
    t("g5.4xlarge", 1, false, false),
    t("g5.8xlarge", 1, true, false),
    t("g5.12xlarge", 4, true, false),
    t("g5.16xlarge", 1, true, false),
    t("g5.24xlarge", 4, true, false),
    t("g5.48xlarge", 8, true, false),
    t("g6.xlarge", 1, false, false),
    t("g6.2xlarge", 1, false, false),
    t("g6.4xlarge", 1, false, false),
    t("g6.8xlarge", 1, true, false),
    t("g6.12xlarge", 4, true, false),
    t("g6.16xlarge", 1, true, false),
    t("g6.24xlarge", 4, true, false),
    t("g6.48xlarge", 8, true, false),
    t("g6e.xlarge", 1, false, false),
    t("g6e.2xlarge", 1, false, false),
    t("g6e.4xlarge", 1, false, false),
    t("g6e.8xlarge", 1, true, false),
    t("g6e.12xlarge", 4, true, false),
    t("g6e.16xlarge", 1, true, false),
    t("g6e.24xlarge", 4, true, false),
    t("g6e.48xlarge", 8, true, false),
    t("trn1.32xlarge", 0, true, false),
    t("trn1n.32xlarge", 0, true, false),
    t("trn2.48xlarge", 0, true, false),
];

/// The facts of one type (`ml.` prefix optional).
pub fn instance_facts(instance_type: &str) -> Option<&'static InstanceFacts> {
    let name = instance_type.trim_start_matches("ml.");
    INSTANCE_TYPES.iter().find(|f| f.name == name)
}

/// GPUs per instance (`ml.` prefix optional); 0 for types without NVIDIA GPUs.
pub fn gpus_per_instance(instance_type: &str) -> u32 {
    instance_facts(instance_type).map_or(0, |f| f.gpus)
}

/// Whether an instance type can carry an EFA interface (`ml.` prefix optional).
pub fn efa_supported(instance_type: &str) -> bool {
    instance_facts(instance_type).is_some_and(|f| f.efa)
}

/// EFA interfaces a pod of this type requests (`vpc.amazonaws.com/efa`): the device plugin
/// offers one per EFA-capable network card; 0 where EFA is not supported.
pub fn efa_interfaces(instance_type: &str) -> u32 {
    let name = instance_type.trim_start_matches("ml.");
    match name {
        n if !efa_supported(n) => 0,
        "p5.48xlarge" | "p5e.48xlarge" => 32,
        "p5en.48xlarge" | "p6-b200.48xlarge" => 16,
        "p4d.24xlarge" | "p4de.24xlarge" => 4,
        "trn1.32xlarge" | "trn1n.32xlarge" => 8,
        "trn2.48xlarge" => 16,
        _ => 1,
    }
}

/// Whether a type is of the p-families (scarce capacity, two threads per core).
pub fn high_end(instance_type: &str) -> bool {
    instance_facts(instance_type).is_some_and(|f| f.high_end)
}

/// The EC2 names of the types matching `keep`.
pub fn types_where(keep: impl Fn(&InstanceFacts) -> bool) -> Vec<&'static str> {
    INSTANCE_TYPES
        .iter()
        .filter(|f| keep(f))
        .map(|f| f.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_read_with_or_without_the_ml_prefix() {
        assert_eq!(gpus_per_instance("ml.p5.48xlarge"), 8);
        assert_eq!(gpus_per_instance("g5.12xlarge"), 4);
        assert_eq!(gpus_per_instance("ml.g5.8xlarge"), 1);
        assert_eq!(gpus_per_instance("ml.trn1.32xlarge"), 0);
        assert_eq!(gpus_per_instance("ml.c5.large"), 0);
        assert!(efa_supported("ml.g5.8xlarge") && !efa_supported("ml.g5.4xlarge"));
        assert!(efa_supported("ml.trn1.32xlarge"));
        assert!(high_end("ml.p4de.24xlarge") && !high_end("ml.g6e.48xlarge"));
    }
}
