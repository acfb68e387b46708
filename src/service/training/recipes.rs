//! Training recipes: what a user picks by name (plain PyTorch, LLaMA-Factory, MS-Swift on the
//! HyperPod training operator; VERL on KubeRay), the inputs each needs, its pinned image, and the
//! command it runs. Every input is a validated path under `/s3` or a number, and commands are
//! argument lists: nothing a request sends is parsed by a shell.

use serde::Serialize;
use utoipa::ToSchema;

/// Which operator runs a recipe's jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// `HyperPodPyTorchJob` (sagemaker.amazonaws.com/v1), with the recovery budget and hang
    /// detection of the HyperPod training operator.
    HyperPodPytorch,
    /// `RayJob` (ray.io/v1) through KubeRay, for Ray-native work such as RL.
    Ray,
}

/// One decision-level input of a recipe.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecipeInput {
    /// The request field.
    pub field: &'static str,
    pub required: bool,
    pub description: &'static str,
}

/// A recipe as `GET /api/recipes` lists it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Recipe {
    pub name: &'static str,
    pub title: &'static str,
    pub runtime: Runtime,
    /// The pinned image (`image` in the request overrides it).
    pub image: &'static str,
    pub inputs: &'static [RecipeInput],
    pub description: &'static str,
}

const fn input(field: &'static str, required: bool, description: &'static str) -> RecipeInput {
    RecipeInput {
        field,
        required,
        description,
    }
}

const COMMON: [RecipeInput; 3] = [
    input(
        "instanceType",
        true,
        "An instance type of one of the cluster's instance groups.",
    ),
    input(
        "nodeCount",
        false,
        "Nodes (one pod per node, every GPU of it); default 1.",
    ),
    input(
        "output",
        false,
        "Where results and checkpoints go, under /s3 (default /s3/outputs/<name>).",
    ),
];

pub static RECIPES: &[Recipe] = &[
    Recipe {
        name: "pytorch",
        title: "PyTorch script",
        runtime: Runtime::HyperPodPytorch,
        image: "public.ecr.aws/deep-learning-containers/pytorch-training:2.6.0-gpu-py312-cu126-ubuntu22.04-ec2",
        inputs: &[
            input("script", true, "The training script under /s3 (e.g. /s3/code/train.py), run by the HyperPod elastic agent (hyperpodrun) on every node."),
            input("dataset", false, "Dataset directory under /s3, passed as DATASET_DIR."),
            input("model", false, "Model directory under /s3, passed as MODEL_DIR."),
            COMMON[0], COMMON[1], COMMON[2],
        ],
        description: "Your own torch.distributed script under the HyperPod elastic agent; DATASET_DIR, MODEL_DIR and OUTPUT_DIR are set.",
    },
    Recipe {
        name: "llama-factory",
        title: "LLaMA-Factory fine-tuning (LoRA SFT)",
        runtime: Runtime::HyperPodPytorch,
        image: "docker.io/hiyouga/llamafactory:0.9.3",
        inputs: &[
            input("model", true, "Model directory under /s3 (e.g. what a model download wrote: /s3/models/Qwen/Qwen3-8B)."),
            input("dataset", true, "Dataset directory under /s3 holding dataset_info.json with a dataset named `train`."),
            COMMON[0], COMMON[1], COMMON[2],
        ],
        description: "Supervised fine-tuning with LoRA through LLaMA-Factory's trainer, one process per GPU.",
    },
    Recipe {
        name: "ms-swift",
        title: "MS-Swift fine-tuning (LoRA SFT)",
        runtime: Runtime::HyperPodPytorch,
        image: "modelscope-registry.us-west-1.cr.aliyuncs.com/modelscope-repo/modelscope:ubuntu22.04-cuda12.4.0-py311-torch2.6.0-vllm0.8.5.post1-modelscope1.27.1-swift3.5.3",
        inputs: &[
            input("model", true, "Model directory under /s3."),
            input("dataset", true, "Dataset file or directory under /s3 (JSONL in Swift's messages format)."),
            COMMON[0], COMMON[1], COMMON[2],
        ],
        description: "Supervised fine-tuning with LoRA through ModelScope Swift (swift.cli.sft), one process per GPU.",
    },
    Recipe {
        name: "verl",
        title: "VERL reinforcement learning (PPO/GRPO)",
        runtime: Runtime::Ray,
        image: "docker.io/verlai/verl:app-verl0.4-vllm0.8.5-mcore0.12.1",
        inputs: &[
            input("model", true, "Actor model directory under /s3."),
            input("dataset", true, "Directory under /s3 with train.parquet and test.parquet."),
            COMMON[0], COMMON[1], COMMON[2],
        ],
        description: "VERL's PPO trainer as a RayJob: a Ray head and one GPU worker per node; the trainer is the job's entrypoint.",
    },
];

pub fn recipe(name: &str) -> Option<&'static Recipe> {
    RECIPES.iter().find(|r| r.name == name)
}

/// What a recipe's command is built from (validated).
pub struct CommandInputs<'a> {
    pub nodes: u32,
    pub gpus: u32,
    pub script: Option<&'a str>,
    pub model: Option<&'a str>,
    pub dataset: Option<&'a str>,
    pub output: &'a str,
    pub extra: &'a [String],
    /// The elastic agent's launcher: `hyperpodrun` on the image's path, or the one the init
    /// container installed.
    pub launcher: &'a str,
}

/// The HyperPod elastic agent with the operator's expected flags, in front of `program`.
fn hyperpodrun(i: &CommandInputs<'_>, program: &[&str]) -> Vec<String> {
    let mut cmd: Vec<String> = vec![
        i.launcher.into(),
        "--tee=3".into(),
        "--log_dir=/tmp/hyperpod".into(),
        format!("--nproc_per_node={}", i.gpus),
        format!("--nnodes={}", i.nodes),
    ];
    cmd.extend(program.iter().map(|s| s.to_string()));
    cmd
}

impl Recipe {
    /// The container command of a HyperPodPyTorchJob recipe, or the RayJob entrypoint's words.
    pub fn command(&self, i: &CommandInputs<'_>) -> Vec<String> {
        let model = i.model.unwrap_or_default();
        let dataset = i.dataset.unwrap_or_default();
        let mut cmd = match self.name {
            "pytorch" => hyperpodrun(i, &[i.script.unwrap_or_default()]),
            "llama-factory" => {
                let mut c = hyperpodrun(i, &["/app/src/train.py"]);
                c.extend(
                    [
                        "--stage=sft",
                        "--do_train=true",
                        "--finetuning_type=lora",
                        "--template=default",
                        "--dataset=train",
                        "--report_to=none",
                    ]
                    .map(String::from),
                );
                c.push(format!("--model_name_or_path={model}"));
                c.push(format!("--dataset_dir={dataset}"));
                c.push(format!("--output_dir={}", i.output));
                c
            }
            "ms-swift" => {
                let mut c = hyperpodrun(i, &["-m", "swift.cli.sft"]);
                c.extend(["--train_type", "lora"].map(String::from));
                c.extend(["--model".into(), model.to_string()]);
                c.extend(["--dataset".into(), dataset.to_string()]);
                c.extend(["--output_dir".into(), i.output.to_string()]);
                c
            }
            // VERL: the trainer is the Ray job's driver; Ray places the workers.
            _ => vec![
                "python3".into(),
                "-m".into(),
                "verl.trainer.main_ppo".into(),
                format!("data.train_files={dataset}/train.parquet"),
                format!("data.val_files={dataset}/test.parquet"),
                format!("actor_rollout_ref.model.path={model}"),
                format!("critic.model.path={model}"),
                format!("trainer.nnodes={}", i.nodes),
                format!("trainer.n_gpus_per_node={}", i.gpus),
                format!("trainer.default_local_dir={}", i.output),
                "trainer.logger=['console']".into(),
            ],
        };
        cmd.extend(i.extra.iter().cloned());
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_recipe_names_its_required_inputs_and_commands_carry_them() {
        for r in RECIPES {
            assert!(r
                .inputs
                .iter()
                .any(|i| i.field == "instanceType" && i.required));
            let i = CommandInputs {
                nodes: 2,
                gpus: 8,
                script: Some("/s3/code/train.py"),
                model: Some("/s3/models/m"),
                dataset: Some("/s3/data/d"),
                output: "/s3/outputs/j",
                extra: &["--epochs=1".to_string()],
                launcher: "hyperpodrun",
            };
            let cmd = r.command(&i);
            assert_eq!(cmd.last().unwrap(), "--epochs=1", "{}", r.name);
            let text = cmd.join(" ");
            // The plain script reads OUTPUT_DIR from its environment; the others take a flag.
            assert!(
                r.name == "pytorch" || text.contains("/s3/outputs/j"),
                "{}: {text}",
                r.name
            );
            if r.runtime == Runtime::HyperPodPytorch {
                assert_eq!(cmd[0], "hyperpodrun");
                assert!(cmd.contains(&"--nproc_per_node=8".to_string()));
                assert!(cmd.contains(&"--nnodes=2".to_string()));
            }
            for input in r.inputs.iter().filter(|i| i.required) {
                let value = match input.field {
                    "script" => "/s3/code/train.py",
                    "model" => "/s3/models/m",
                    "dataset" => "/s3/data/d",
                    _ => continue,
                };
                assert!(
                    text.contains(value),
                    "{}: {} not in {text}",
                    r.name,
                    input.field
                );
            }
        }
    }
}
