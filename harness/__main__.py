"""``python -m harness``: the Hydra entry point.

    python -m harness -m swizzle=xcd,grouped shape=resnet
"""
from harness.device import select_execution_mode

# Decide GPU vs interpreter before anything imports triton (see harness.device).
MODE = select_execution_mode()

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402


@hydra.main(version_base="1.3", config_path="pkg://swizzlebench_conf", config_name="config")
def main(cfg: DictConfig) -> None:
    from harness.app import run_hydra_job

    run_hydra_job(cfg, MODE)


if __name__ == "__main__":
    main()
