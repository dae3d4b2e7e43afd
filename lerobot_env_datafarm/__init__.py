"""DataFarm's tasks as a lerobot env plugin: `lerobot-eval --env.type=datafarm --env.workspace=WS --policy.path=...`.

lerobot 0.6.1 imports third-party plugins by DISTRIBUTION name (`register_third_party_plugins` imports
every installed distribution whose name starts with ``lerobot_env_``). This package ships inside the
datafarm distribution; the metadata-only distribution in plugins/lerobot_env_datafarm (installed by
`make setup`) carries the name lerobot looks for. Without it, pass
``--env.discover_packages_path=lerobot_env_datafarm`` (lerobot's other plugin switch).

Importing this package registers the env config "datafarm" (config.py); the environment is env.py.
"""

from lerobot_env_datafarm.config import DataFarmEnvConfig

__all__ = ["DataFarmEnvConfig"]
