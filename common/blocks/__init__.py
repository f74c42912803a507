"""Sequence and channel mixers, one family per file, all in one registry (`registry.BLOCKS`)."""

from common.blocks import attention, hf_layers, hyena, mamba, masked_mixer, mlp, moe, transfixer  # noqa: F401  (importing a family registers its blocks)
from common.blocks.registry import BLOCKS, Block, build_block, register  # noqa: F401
