//! Which phases a feature's change runs: its family's chain (roles, add-on, identity; or the
//! tiered-checkpointing and autoscaling chains), reversed to disable, after the prerequisites
//! the same request enables.

use std::sync::Arc;

use super::{handover, prerequisites, Feature, FeatureParams, AUTOSCALING, TIERED};
use super::{
    AutoscalingConfigStep, CheckpointRoleStep, CheckpointServiceAccountStep, FeatureAddonStep,
    FeatureIdentityStep, NodeClassStep, OwnRoleStep, TieredConfigStep, INFERENCE_OPERATOR_ADDON,
};
use crate::ops::Step;
use crate::service::shared::kind::FeatureId;

/// Which chain of steps a feature runs.
pub enum Family {
    /// Its own roles (if any) → the EKS add-on → its pod identity binding.
    Addon,
    /// Role → service account → the cluster's `TieredStorageConfig`.
    Tiered,
    /// Role → the cluster's `AutoScaling` → node class and pool.
    Autoscaling,
}

impl Feature {
    pub fn family(&self) -> Family {
        match self.key {
            TIERED => Family::Tiered,
            AUTOSCALING => Family::Autoscaling,
            _ => Family::Addon,
        }
    }

    /// The phases that enable this feature, in order; disabling runs them in reverse.
    pub fn steps(&self, enable: bool) -> Option<Vec<Arc<dyn Step>>> {
        let mut chain: Vec<Arc<dyn Step>> = match self.family() {
            Family::Tiered => vec![
                Arc::new(CheckpointRoleStep),
                Arc::new(CheckpointServiceAccountStep),
                Arc::new(TieredConfigStep),
            ],
            Family::Autoscaling => vec![
                Arc::new(OwnRoleStep),
                Arc::new(AutoscalingConfigStep),
                Arc::new(NodeClassStep),
            ],
            Family::Addon => {
                let mut chain: Vec<Arc<dyn Step>> = Vec::new();
                if self.id == FeatureId::Observability {
                    // The workspace first: the role may write to it, the add-on names it.
                    chain.push(Arc::new(super::observability::WorkspaceStep));
                }
                if !self.own_roles.is_empty() {
                    chain.push(Arc::new(OwnRoleStep));
                }
                if self.id == FeatureId::InferenceOperator {
                    // Its add-on brings its own KEDA: ours leaves before it comes and returns
                    // after it has gone (the chain runs in reverse to disable).
                    chain.push(match enable {
                        true => Arc::new(handover::KedaHandoverStep),
                        false => {
                            Arc::new(crate::service::steps::deps::ComponentStep(keda_component()?))
                        }
                    });
                }
                chain.push(Arc::new(FeatureAddonStep));
                chain.push(Arc::new(FeatureIdentityStep));
                chain
            }
        };
        if !enable {
            chain.reverse();
        }
        Some(chain)
    }

    /// The phases of one change: [`Feature::steps`], after waiting for the prerequisites the
    /// same request enables.
    pub fn chain(&self, p: &FeatureParams) -> Option<Vec<Arc<dyn Step>>> {
        let mut chain = self.steps(p.enable)?;
        if p.enable && p.grafana_workspace.is_some() && self.id == FeatureId::Observability {
            // Before the add-on is told to put its dashboards there (after the AMP workspace).
            chain.insert(1, Arc::new(super::observability::GrafanaStep));
        }
        if p.enable && !p.after.is_empty() {
            chain.insert(0, Arc::new(prerequisites::PrerequisitesStep));
        }
        Some(chain)
    }
}

/// Our KEDA, the dependency component the inference operator's add-on stands in for.
fn keda_component() -> Option<&'static crate::service::steps::deps::Component> {
    crate::service::steps::deps::COMPONENTS
        .iter()
        .find(|c| c.provided_by == Some(INFERENCE_OPERATOR_ADDON))
}
