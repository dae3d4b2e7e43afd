"""Wan2.1-VACE pipelines: loading one from a local folder (diffusers' layout), and building one with random weights.

Random pipelines have the real architecture (UMT5 text encoder, Wan VAE, VACE transformer) at a chosen
size: `TINY` runs the whole renderer on a CPU in seconds (tests, the CPU benchmark); `WAN_1_3B` has the
1.3B checkpoint's shapes, so a GPU benchmark without the weights still measures speed and memory honestly.
Nothing here downloads: `load_pipeline` reads only the folder it is given.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from datafarm.errors import BadInput

log = logging.getLogger(__name__)

MODEL_INDEX = "model_index.json"
PIPELINE_PARTS = ("transformer", "vae", "text_encoder", "tokenizer", "scheduler")


class WeightsMissing(BadInput, FileNotFoundError):
    """The model folder is not a Wan VACE pipeline in diffusers' layout."""


def missing_parts(folder: Path) -> list[str]:
    """What a diffusers-layout Wan VACE folder lacks (model_index.json and one folder per part); [] if complete."""
    folder = Path(folder)
    if not folder.is_dir():
        return [str(folder)]
    return [name for name in (MODEL_INDEX, *PIPELINE_PARTS) if not (folder / name).exists()]


def check_weights(folder: Path) -> Path:
    """The folder, or WeightsMissing naming what is missing and how to get the weights."""
    missing = missing_parts(folder)
    if missing:
        raise WeightsMissing(
            f"{folder} is not a Wan VACE pipeline in diffusers' layout (missing: {', '.join(missing)}); download "
            "the diffusers version of Wan2.1-VACE-1.3B (or 14B) into it on a machine with access to the hub "
            "(see docs/rendering.md), then pass that folder")
    return Path(folder)


def load_pipeline(folder: Path, device: str | None = None, dtype: str = "auto"):
    """WanVACEPipeline.from_pretrained on a local folder only (local_files_only: nothing is downloaded).

    dtype "auto": bfloat16 on CUDA, float32 on the CPU. The VAE stays float32 (as diffusers advises for Wan).
    """
    import torch
    from diffusers import AutoencoderKLWan, WanVACEPipeline

    folder = check_weights(Path(folder))
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch_dtype = {"auto": torch.bfloat16 if device.startswith("cuda") else torch.float32,
                   "bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[dtype]
    vae = AutoencoderKLWan.from_pretrained(folder, subfolder="vae", dtype=torch.float32, local_files_only=True)
    pipeline = WanVACEPipeline.from_pretrained(folder, vae=vae, dtype=torch_dtype, local_files_only=True)
    pipeline.set_progress_bar_config(disable=True)
    log.info("loaded Wan VACE pipeline from %s on %s (%s)", folder, device, torch_dtype)
    return pipeline.to(device)


@dataclass(frozen=True)
class WanSize:
    """The shapes of a random Wan VACE pipeline."""

    layers: int
    heads: int
    head_dim: int
    ffn_dim: int
    vace_layers: tuple[int, ...]
    text_dim: int
    text_layers: int
    text_heads: int
    text_ff: int
    text_buckets: int
    vae_base_dim: int
    vae_res_blocks: int
    vocabulary: int


TINY = WanSize(layers=2, heads=2, head_dim=8, ffn_dim=32, vace_layers=(0, 1), text_dim=32, text_layers=2,
               text_heads=2, text_ff=64, text_buckets=8, vae_base_dim=8, vae_res_blocks=1, vocabulary=64)
# Wan2.1-VACE-1.3B's transformer (30 layers, 12 x 128 heads, VACE blocks every second layer), the real VAE
# (base 96) and UMT5-XXL (24 layers, 4096 wide) text encoder.
WAN_1_3B = WanSize(layers=30, heads=12, head_dim=128, ffn_dim=8960, vace_layers=tuple(range(0, 30, 2)),
                   text_dim=4096, text_layers=24, text_heads=64, text_ff=10240, text_buckets=32, vae_base_dim=96,
                   vae_res_blocks=2, vocabulary=256384)


def _word_tokenizer(vocabulary: int):
    """A word-level tokenizer (transformers' fast tokenizer over `tokenizers`' WordLevel): no download."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "</s>", "<unk>"] + [f"w{i}" for i in range(vocabulary - 3)]
    core = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


def build_random_pipeline(size: WanSize = TINY, seed: int = 0):
    """A WanVACEPipeline of `size` with random weights (float32, CPU); `save_pretrained` writes diffusers' layout."""
    import torch
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanVACEPipeline, WanVACETransformer3DModel
    from transformers import UMT5Config, UMT5EncoderModel

    torch.manual_seed(seed)
    text_encoder = UMT5EncoderModel(UMT5Config(
        vocab_size=size.vocabulary, d_model=size.text_dim, d_kv=size.text_dim // size.text_heads,
        d_ff=size.text_ff, num_layers=size.text_layers, num_heads=size.text_heads,
        relative_attention_num_buckets=size.text_buckets, feed_forward_proj="gated-gelu", pad_token_id=0,
        eos_token_id=1, decoder_start_token_id=0))
    vae = AutoencoderKLWan(base_dim=size.vae_base_dim, z_dim=16, dim_mult=[1, 2, 4, 4],
                           num_res_blocks=size.vae_res_blocks, temperal_downsample=[False, True, True])
    transformer = WanVACETransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=size.heads, attention_head_dim=size.head_dim, in_channels=16,
        out_channels=16, text_dim=size.text_dim, freq_dim=256, ffn_dim=size.ffn_dim, num_layers=size.layers,
        cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=1024,
        vace_layers=list(size.vace_layers), vace_in_channels=96)
    scheduler = FlowMatchEulerDiscreteScheduler(shift=3.0)
    pipeline = WanVACEPipeline(tokenizer=_word_tokenizer(size.vocabulary), text_encoder=text_encoder, vae=vae,
                               scheduler=scheduler, transformer=transformer)
    pipeline.set_progress_bar_config(disable=True)
    return pipeline
