"""Measuring a verified job: the correctness gate's operands and reference, paired
interleaved timing (timing, cupti), its statistics and verdicts (stats, paired), and the
roofline a timed cell is placed on."""
