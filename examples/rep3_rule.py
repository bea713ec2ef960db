"""A hand-written decoder as a user function: syndrome bytes in, correction bytes out.

Repetition-3 memory experiment, one round (stim ``repetition_code:memory``, distance 3): detectors
0 and 1 are the ancillas' parity checks of data qubits (0, 2) and (2, 4); detectors 2 and 3 compare
the final data readout with them. The logical observable is data qubit 4. The rule: rebuild the data
parities from the final readout (detector 0 XOR detector 2, detector 1 XOR detector 3) and flip the
observable when only the (2, 4) parity is odd, i.e. when qubit 4 is the one that flipped. For this
circuit the rule makes the same choice as the exact maximum-likelihood table on all 16 syndromes
(``twin.qec.lookup.standard_table("rep3")``), so ``twin decode scenarios/decode_rep3_user.yaml``
shows it level with stim+PyMatching.
"""


def decode(payload: bytes) -> bytes:
    """Request payload (detector i in bit i) -> one byte, bit 0 = flip the logical observable."""
    s = payload[0]
    d0, d1, d2, d3 = s & 1, (s >> 1) & 1, (s >> 2) & 1, (s >> 3) & 1
    p02, p24 = d0 ^ d2, d1 ^ d3
    return bytes([int(p24 and not p02)])
