"""DataFarm: simulated, re-rendered, reviewed robot datasets for the dual-arm AgileX PiPER."""

__version__ = "0.1.0"
