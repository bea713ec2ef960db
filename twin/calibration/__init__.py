"""Calibration: the measured numbers, the parameter sets fitted to them, and the fitter."""
from twin.calibration.params import ParamSet, load_params
from twin.calibration.measured import Measured, load_measured

__all__ = ["ParamSet", "load_params", "Measured", "load_measured"]
