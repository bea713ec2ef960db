"""The exchange layer: the memory contract between producer and consumer.

A request queue in the consumer's memory, a reply queue in the producer's memory, publish-last
words, a release fence before a classic reply's ready word, and slot reuse only after the reply
is consumed. :mod:`twin.exchange.encoding` holds the two encodings.
"""
from twin.exchange.encoding import CLASSIC, PER_PIECE, Encoding, get_encoding

__all__ = ["CLASSIC", "PER_PIECE", "Encoding", "get_encoding"]
