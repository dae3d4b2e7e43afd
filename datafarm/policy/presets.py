"""Training presets: data (configs/policy/<policy>-<preset>.yaml), validated by one pydantic model.

A preset says which cameras a policy sees, at what image size, how many steps at what batch size, and
which of lerobot's policy options differ from lerobot's defaults (passed as ``--policy.<option>=<value>``).
`smoke` runs in seconds (tests), `cpu` is a reduced model that learns on 2 cores, `gpu` is lerobot's
defaults at full resolution.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from datafarm.errors import BadInput, Unavailable
from datafarm.paths import CONFIG_DIR
from datafarm.policy.spec import CAMERA_KEYS

log = logging.getLogger(__name__)

POLICY_TYPES = ("act", "diffusion", "pi05")
PRESET_NAMES = ("smoke", "cpu", "gpu")
PRESET_DIR = CONFIG_DIR / "policy"
PI_EXTRA = "pi"  # pyproject's optional extra that installs what pi05 needs
PI05_TRANSFORMERS_BELOW = (5, 6)  # lerobot[pi] pins transformers < 5.6
PI05_TOKENIZER = "google/paligemma-3b-pt-224"  # gated on the hub: must already be in the local HF cache


class BackboneWeights(BaseModel):
    """torchvision weights the user already has on disk (nothing is downloaded here)."""

    model_config = ConfigDict(extra="forbid")
    weights: str  # torchvision's enum name, e.g. "ResNet18_Weights.IMAGENET1K_V1"
    torch_home: str  # the TORCH_HOME that holds hub/checkpoints/<weights file>; "~" and $VARS expand

    def local_file(self) -> Path | None:
        """The weights file if it is on disk under torch_home, else None."""
        import os

        import torchvision.models as models

        enum_name, member = self.weights.split(".", 1)
        url = getattr(getattr(models, enum_name), member).url
        path = Path(os.path.expandvars(self.torch_home)).expanduser() / "hub" / "checkpoints" / url.rsplit("/", 1)[1]
        return path if path.is_file() else None


class PosePretraining(BaseModel):
    """Pretrain the backbone on the simulator's object and gripper positions first (:mod:`.pose_pretraining`)."""

    model_config = ConfigDict(extra="forbid")
    steps: int = Field(gt=0)
    batch_size: int = Field(ge=2)  # BatchNorm needs two samples where a small camera's feature map is 1x1
    learning_rate: float = Field(default=1e-3, gt=0)


class Preset(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policy: Literal["act", "diffusion", "pi05"]
    name: Literal["smoke", "cpu", "gpu"]
    description: str
    cameras: list[str] = Field(min_length=1)  # farm camera names
    image_size: tuple[int, int] | None = None  # (height, width) of every camera; None: the delivered resolution
    camera_sizes: dict[str, tuple[int, int]] = {}  # (height, width) of some cameras, instead of image_size
    steps: int = Field(gt=0)
    batch_size: int = Field(gt=0)
    num_workers: int = Field(ge=0)
    save_freq: int = Field(gt=0)  # checkpoint (and resume point) every this many steps
    keep_checkpoints: int | None = Field(default=3, gt=0)  # the newest N stay on disk (None: all of them)
    log_freq: int = Field(gt=0)  # one loss-curve point every this many steps
    seed: int = 1000
    device: str | None = None  # "cpu", "cuda"; None: lerobot picks
    # torch/OpenMP threads of the training process (None: torch's default, one per core). On a CPU shared
    # with other work, more threads than free cores make small tensor ops wait on each other: measured on
    # 2 busy cores, one 96x128 sample loaded in 176 ms with the default and 4 ms with 1 thread.
    torch_threads: int | None = Field(default=None, gt=0)
    policy_options: dict[str, Any] = {}  # lerobot's --policy.<option>=<value>
    backbone: BackboneWeights | None = None  # used only when its file is on disk
    pose_pretraining: PosePretraining | None = None  # ACT only; instead of a pretrained backbone
    pretrained_path: str | None = None  # a local pretrained policy folder (pi05 starts from pi05_base)
    needs_extra: str | None = None  # pyproject extra this policy needs

    @field_validator("cameras")
    @classmethod
    def _known_cameras(cls, cameras: list[str]) -> list[str]:
        unknown = [c for c in cameras if c not in CAMERA_KEYS]
        if unknown:
            raise ValueError(f"unknown cameras {unknown}; the farm's cameras are {list(CAMERA_KEYS)}")
        return cameras

    @model_validator(mode="after")
    def _sized_cameras_are_used(self) -> Preset:
        unused = sorted(set(self.camera_sizes) - set(self.cameras))
        if unused:
            raise ValueError(f"camera_sizes names {unused}, which the preset's cameras {self.cameras} do not include")
        return self

    @model_validator(mode="after")
    def _pose_pretraining_is_for_act(self) -> Preset:
        if self.pose_pretraining and (self.policy != "act" or self.backbone or self.pretrained_path
                                      or not self.needs_derived_dataset):
            raise ValueError("pose_pretraining initialises a random ACT backbone from a derived dataset's frames: "
                             "it needs policy act, resized cameras, and neither backbone nor pretrained_path")
        return self

    @property
    def image_sizes(self) -> dict[str, tuple[int, int] | None]:
        """Each camera's training (height, width); None: the delivered resolution."""
        return {c: self.camera_sizes.get(c, self.image_size) for c in self.cameras}

    @property
    def folder_name(self) -> str:
        return f"{self.policy}-{self.name}"

    @property
    def needs_derived_dataset(self) -> bool:
        """Resized or fewer cameras: train on a derived image dataset (frames decoded once)."""
        resized = any(size is not None for size in self.image_sizes.values())
        return resized or set(self.cameras) != set(CAMERA_KEYS)


def preset_path(policy: str, name: str) -> Path:
    return PRESET_DIR / f"{policy}-{name}.yaml"


def available_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_preset(policy: str, name: str) -> Preset:
    path = preset_path(policy, name)
    if not path.is_file():
        raise BadInput(f"no training preset {policy}-{name} ({path} missing); known presets: "
                       f"{', '.join(available_presets())}")
    return load_preset_file(path)


def load_preset_file(path: Path) -> Preset:
    try:
        preset = Preset.model_validate(yaml.safe_load(Path(path).read_text()))
    except ValueError as error:
        raise BadInput(f"training preset {path} is invalid: {error}; fix the file") from error
    if Path(path).stem != preset.folder_name:
        raise BadInput(f"training preset {path} declares {preset.folder_name}; name the file {preset.folder_name}.yaml")
    return preset


def lerobot_option_problems(preset: Preset) -> list[str]:
    """policy_options that lerobot's config class for this policy does not have (imports lerobot)."""
    from lerobot.configs.policies import PreTrainedConfig

    import lerobot.policies  # noqa: F401  (registers every policy config)

    config_class = PreTrainedConfig.get_choice_class(preset.policy)
    fields = {f.name for f in dataclasses.fields(config_class)}
    return [f"{preset.folder_name}: lerobot's {config_class.__name__} has no option {key!r}"
            for key in preset.policy_options if key not in fields]


def pi05_problems() -> list[str]:
    """Why pi05 cannot train here (empty when it can): the `pi` extra's transformers and the gated tokenizer."""
    problems = []
    try:
        version = importlib.metadata.version("transformers")
        major_minor = tuple(int(part) for part in version.split(".")[:2])
        if major_minor >= PI05_TRANSFORMERS_BELOW:
            problems.append(f"transformers {version} is installed; pi05 needs < "
                            f"{'.'.join(map(str, PI05_TRANSFORMERS_BELOW))}: install the `{PI_EXTRA}` extra "
                            f"in a separate environment (`pip install -e '.[{PI_EXTRA}]'`)")
    except importlib.metadata.PackageNotFoundError:
        problems.append(f"transformers is not installed: install the `{PI_EXTRA}` extra "
                        f"(`pip install -e '.[{PI_EXTRA}]'`)")
    if not _tokenizer_cached(PI05_TOKENIZER):
        problems.append(f"the gated tokenizer {PI05_TOKENIZER} is not in the local Hugging Face cache: accept its "
                        "licence on the hub and download it on a connected machine (`hf download "
                        f"{PI05_TOKENIZER} --include 'tokenizer*'`), then copy the cache here")
    return problems


def require_usable(preset: Preset) -> None:
    """Refuse early, with the fix, when the preset's policy cannot train in this environment."""
    if preset.policy == "pi05":
        problems = pi05_problems()
        if problems:
            raise Unavailable("pi05 cannot train here: " + "; ".join(problems))


def _tokenizer_cached(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    found = try_to_load_from_cache(repo_id, "tokenizer_config.json")
    return isinstance(found, str)
