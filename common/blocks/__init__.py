"""Sequence and channel mixers, one family per file, all in one registry (`registry.BLOCKS`)."""

from common.blocks import attention, hf_layers, hyena, mamba, masked_mixer, mlp, moe  # noqa: F401  (importing a family registers its blocks)
from common.blocks.registry import BLOCKS, Block, build_block, register  # noqa: F401
from common.blocks import transfixer  # noqa: F401,E402  (the Masked Mixers transformer-mixer hybrid)
