# A training image that carries the HyperPod elastic agent (`hyperpodrun`), which the HyperPod
# training operator's jobs run under. Build it on the image a recipe pins (or your own):
#
#   docker build -f recipes/elastic-agent.Dockerfile \
#     --build-arg BASE_IMAGE=public.ecr.aws/deep-learning-containers/pytorch-training:2.6.0-gpu-py312-cu126-ubuntu22.04-ec2 \
#     -t <account>.dkr.ecr.<region>.amazonaws.com/trainer:pytorch-2.6 .
#
# then push it and submit jobs with `image` set to it and `elasticAgent: bundled`. The agent's
# dependencies are resolved against the base image's packages: its torch stays as it is.
ARG BASE_IMAGE=public.ecr.aws/deep-learning-containers/pytorch-training:2.6.0-gpu-py312-cu126-ubuntu22.04-ec2
FROM ${BASE_IMAGE}
RUN python -m pip install --no-cache-dir "hyperpod-elastic-agent==1.1.3" \
    && command -v hyperpodrun
