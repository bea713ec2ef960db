"""Calibration: the measured numbers, the parameter sets fitted to them, and the fitter."""
from twin.calibration.measured import Measured, load_measured
from twin.calibration.params import ParamSet, load_params

__all__ = ["ParamSet", "load_params", "Measured", "load_measured"]
