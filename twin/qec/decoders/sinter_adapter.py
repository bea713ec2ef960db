"""Any ``sinter.Decoder`` as a registry decoder: BP+OSD (``stimbposd``), Tesseract, Relay-BP, or a
user's class named in a scenario (``decode.decoder: "sinter:pkg.module:Class"``)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import stim

from twin.qec.decoders.base import Decoder


def sinter_dem(model: stim.Circuit | stim.DetectorErrorModel) -> stim.DetectorErrorModel:
    """The detector error model sinter would give a decoder for ``model``: decomposed where stim
    can, else undecomposed, else with loops flattened (the order of sinter 1.16's collection worker,
    ``sinter/_collection/_collection_worker_state.py``). A model that is already a DEM is returned."""
    if isinstance(model, stim.DetectorErrorModel):
        return model
    for kw in ({"decompose_errors": True}, {}, {"flatten_loops": True}):
        try:
            return model.detector_error_model(approximate_disjoint_errors=True, **kw)
        except ValueError:
            continue
    return model.detector_error_model(approximate_disjoint_errors=True, flatten_loops=True)  # raises stim's error


class SinterDecoder(Decoder):
    """``inner`` (a ``sinter.Decoder`` instance, or any object with its methods, as Tesseract's
    is) compiled for ``model``'s detector error model (:func:`sinter_dem`) with
    ``compile_decoder_for_dem``; one that implements only ``decode_via_files`` decodes through b8
    files in a temporary folder. ``kind``: the cost-model key (``bposd``, ``tesseract``, ``sinter``
    for a user's class). Raises TypeError for an object that is not a sinter decoder."""

    def __init__(self, inner, model: stim.Circuit | stim.DetectorErrorModel, name: str = "sinter",
                 kind: str = "sinter"):
        if not any(callable(getattr(inner, m, None)) for m in ("compile_decoder_for_dem", "decode_via_files")):
            raise TypeError(f"{type(inner).__name__} is not a sinter decoder (it has neither compile_decoder_for_dem "
                            "nor decode_via_files)")
        self.inner, self.name, self.kind = inner, name, kind
        self.dem = sinter_dem(model)
        self.n_detectors = self.dem.num_detectors
        self.n_observables = self.dem.num_observables
        try:
            self.compiled = inner.compile_decoder_for_dem(dem=self.dem)
        except NotImplementedError:
            self.compiled = None

    def decode_shots_bit_packed(self, dets: np.ndarray) -> np.ndarray:
        """``CompiledDecoder.decode_shots_bit_packed``, or ``decode_via_files`` with b8 files."""
        d = np.ascontiguousarray(dets, np.uint8)
        if self.compiled is not None:
            return self.compiled.decode_shots_bit_packed(bit_packed_detection_event_data=d)
        with tempfile.TemporaryDirectory(prefix="twin_sinter_") as tmp:
            t = Path(tmp)
            (t / "dem.dem").write_text(str(self.dem))
            (t / "dets.b8").write_bytes(d.tobytes())
            self.inner.decode_via_files(num_shots=len(d), num_dets=self.n_detectors, num_obs=self.n_observables,
                                        dem_path=t / "dem.dem", dets_b8_in_path=t / "dets.b8",
                                        obs_predictions_b8_out_path=t / "obs.b8", tmp_dir=t)
            return np.frombuffer((t / "obs.b8").read_bytes(), np.uint8).reshape(len(d), self.reply_bytes).copy()
