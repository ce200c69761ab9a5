"""One solution-side process as the supervisor holds it: the conversation with it under the
supervisor's deadlines (`conversation`: `Session`, `SessionLost`, `CaseResult`) and stopping its
side between timed windows (`pause`: `ProcessPause`). The candidate phase, the timing room and
the verdict all speak of a process in these terms, so this room sits below all three."""

from .conversation import CaseResult, Session, SessionLost
from .pause import ProcessPause

__all__ = ["CaseResult", "ProcessPause", "Session", "SessionLost"]
