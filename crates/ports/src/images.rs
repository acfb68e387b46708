//! What is known of container images without pulling them: which stock training images carry
//! no HyperPod elastic agent (`hyperpodrun`, from the `hyperpod-elastic-agent` package, which
//! AWS says must be installed in the training image). The domain refuses to run `hyperpodrun`
//! from one of them as is, and the sandbox fails a job that tries, as the pod would.

/// The pinned elastic agent: what the init container installs and the image recipe bakes in.
pub const ELASTIC_AGENT_PACKAGE: &str = "hyperpod-elastic-agent==1.1.3";

/// Repositories (any tag) of stock images known to carry no elastic agent: AWS's PyTorch
/// training DLC, LLaMA-Factory's and ModelScope's images.
pub const WITHOUT_ELASTIC_AGENT: &[&str] = &[
    "public.ecr.aws/deep-learning-containers/pytorch-training",
    "763104351884.dkr.ecr.*.amazonaws.com/pytorch-training",
    "docker.io/hiyouga/llamafactory",
    "hiyouga/llamafactory",
    "modelscope-registry.*.cr.aliyuncs.com/modelscope-repo/modelscope",
];

/// An image reference without its tag or digest.
pub fn repository(image: &str) -> &str {
    let image = image.split('@').next().unwrap_or(image);
    match image.rsplit_once(':') {
        // A colon after the last slash is a tag; before it, a registry port.
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => image,
    }
}

/// Whether `image` is a stock image known to carry no elastic agent.
pub fn lacks_elastic_agent(image: &str) -> bool {
    let repo = repository(image);
    WITHOUT_ELASTIC_AGENT
        .iter()
        .any(|p| crate::policy::glob(p, repo, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stock_images_are_known_by_repository_whatever_the_tag() {
        assert!(lacks_elastic_agent(
            "public.ecr.aws/deep-learning-containers/pytorch-training:2.6.0-gpu-py312-cu126-ubuntu22.04-ec2"
        ));
        assert!(lacks_elastic_agent("hiyouga/llamafactory:0.9.3"));
        assert!(lacks_elastic_agent(
            "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training@sha256:abc"
        ));
        assert!(!lacks_elastic_agent(
            "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-trainer:1"
        ));
        assert_eq!(repository("registry:5000/a/b"), "registry:5000/a/b");
        assert_eq!(repository("registry:5000/a/b:7"), "registry:5000/a/b");
    }
}

#[cfg(test)]
mod recipe_image {
    #[test]
    fn the_image_recipe_installs_the_agent_the_init_container_installs() {
        let dockerfile = include_str!("../../../recipes/elastic-agent.Dockerfile");
        assert!(
            dockerfile.contains(&format!("\"{}\"", super::ELASTIC_AGENT_PACKAGE)),
            "{dockerfile}"
        );
    }
}
