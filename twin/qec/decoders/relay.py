"""Relay-BP (IBM's ``relay-bp``) as a registry decoder (``relay_bp``).

``relay_bp``'s own sinter wrapper (``relay_bp.stim``) imports ``beliefmatching``, which pins
numpy <= 2.2.6 (this project runs 2.4); so the check matrices come from ``stimbposd``'s
``detector_error_model_to_check_matrices`` (the same construction, hyperedges kept whole) and the
decoder is relay-bp's core ``RelayDecoderF64`` with the parameters of its sinter wrapper's defaults
(relay-bp 0.2.1: gamma0 0.1, 60 pre-iterations, 60 sets of 60 iterations, gammas uniform in
(-0.24, 0.66), stop after 5 converged sets). The gammas are drawn once, seeded, and given as
``explicit_gammas``: relay-bp draws them afresh from its own generator as it decodes, so the same
syndrome could get another answer later in a run, and the loop needs a decoder that is a function
of the syndrome (it decodes a stream's distinct syndromes once; the card checks every reply)."""
from __future__ import annotations

import numpy as np
import stim

from twin.qec.decoders.base import Decoder, pack_bits, unpack_bits


class RelayBPDecoder(Decoder):
    """Relay-BP on the undecomposed detector error model of ``model``; ``seed`` draws the gammas."""

    kind = "relay_bp"

    def __init__(self, model: stim.Circuit | stim.DetectorErrorModel, name: str = "relay_bp", seed: int = 0):
        import relay_bp
        from stimbposd.dem_to_matrices import detector_error_model_to_check_matrices
        dem = model.detector_error_model(decompose_errors=False) if isinstance(model, stim.Circuit) else model
        m = detector_error_model_to_check_matrices(dem, allow_undecomposed_hyperedges=True)
        self.name, self.n_detectors, self.n_observables = name, dem.num_detectors, dem.num_observables
        dec = relay_bp.RelayDecoderF64(m.check_matrix.tocsr().astype(np.uint8), error_priors=np.asarray(m.priors),
                                       gamma0=0.1, pre_iter=60, num_sets=60, set_max_iter=60, stop_nconv=5,
                                       explicit_gammas=np.random.default_rng(seed).uniform(
                                           -0.24, 0.66, (60, m.check_matrix.shape[1])))
        self.runner = relay_bp.ObservableDecoderRunner(dec, m.observables_matrix.tocsr().astype(np.uint8),
                                                       include_decode_result=False)

    def decode_shots_bit_packed(self, dets: np.ndarray) -> np.ndarray:
        """Unpacked to 0/1 rows, ``decode_observables_batch``, packed."""
        syn = unpack_bits(dets, self.n_detectors)
        return pack_bits(np.asarray(self.runner.decode_observables_batch(syn), dtype=bool))
