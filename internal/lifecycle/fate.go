package lifecycle

// Abort names why a handler's context was cancelled, if it was.
type Abort int

const (
	NoAbort Abort = iota
	AbortInterrupt
	AbortStop
	AbortShutdown
	AbortSupersede
)

// Result is how a handler call ended, as the shell saw it after the
// handler returned.
type Result struct {
	Abort      Abort
	Err        error
	Permanent  bool // Err asked for no retry (or Band refused the reply)
	HasReply   bool
	Failures   int // handler failures charged before this call
	MaxAttempt int
}

// Fate is what happens to the message next.
type Fate int

const (
	// FatePost: guard and post the reply, then mark processed.
	FatePost Fate = iota
	// FateConsume: no reply is due; mark processed.
	FateConsume
	// FateConsumeInterrupted: an interrupt aborted the cycle; drop any
	// reply and mark processed without charging the attempt.
	FateConsumeInterrupted
	// FateLeave: a stop, a shutdown or a supersede aborted the cycle;
	// mark nothing so the message is served again.
	FateLeave
	// FateFail: charge one failure and mark failed; /next serves it again.
	FateFail
	// FateDeadLetter: mark failed with the reason, then consume it so the
	// room moves on.
	FateDeadLetter
)

// Decide returns the message's fate. The cause of a cancellation wins over
// whatever the handler returned: a reply produced after an interrupt is
// dropped, and an error caused by a stop is not a failure.
func Decide(r Result) Fate {
	switch r.Abort {
	case AbortInterrupt:
		return FateConsumeInterrupted
	case AbortStop, AbortShutdown, AbortSupersede:
		return FateLeave
	}
	switch {
	case r.Err != nil && (r.Permanent || r.Failures+1 >= r.MaxAttempt):
		return FateDeadLetter
	case r.Err != nil:
		return FateFail
	case r.HasReply:
		return FatePost
	default:
		return FateConsume
	}
}
