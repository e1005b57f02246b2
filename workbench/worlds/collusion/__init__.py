"""The peer-verification ("collusion") world kind.

Two agents repeat a fixed sequence of episodes (task, communication, verdict,
feedback and reflection); the verification protocol demands the peer's raw
log over a channel too narrow to carry it, so collusion (mutual ACCEPT under
the raw-only policy) can emerge from the reward mechanism.
"""
