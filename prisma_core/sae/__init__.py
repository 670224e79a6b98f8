"""TopK sparse autoencoder with AuxK: configure (`config`), train (`train`, `stream` for vectors read a slice at a
time), encode (`train.encode`, `weights` without torch), save and load (`io`).

The package itself holds only the settings, which import without torch; import the torch parts from their modules
(`from prisma_core.sae.train import train_sae`), so commands that only read settings stay light.
"""

from prisma_core.sae.config import SAEConfig, check_config, suggest_config

__all__ = ["SAEConfig", "check_config", "suggest_config"]
